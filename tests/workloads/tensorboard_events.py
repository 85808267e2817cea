"""tensorboardX's SummaryWriter, the way most training scripts log their loss curve."""

import math

import nightshift
from tensorboardX import SummaryWriter

STEPS = 25


def main() -> None:
    writer = SummaryWriter(nightshift.tensorboard_dir())
    for step in range(STEPS):
        writer.add_scalar("train/loss", math.exp(-step / 10), step)
    writer.close()
    print(f"wrote {STEPS} loss values to {nightshift.tensorboard_dir()}")
    print("WORKLOAD OK")


if __name__ == "__main__":
    main()
