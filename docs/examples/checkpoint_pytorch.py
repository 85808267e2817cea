"""A PyTorch training script that survives its workstation's owner coming back.

Submit it as it is (it trains a small model on random data), or copy the three marked
parts into your own script. When HTCondor vacates the job it gets SIGTERM; the next batch
boundary saves model, optimizer and epoch into nightshift.checkpoint_dir() and exits with the
checkpoint code. On the next workstation the script starts again, finds the checkpoint, and
carries on from the saved epoch and batch: nothing but the unfinished batch is lost.
"""

import os

import nightshift
import torch
from torch import nn

EPOCHS = int(os.environ.get("EPOCHS", "20"))
BATCHES = 200
device = "cuda" if torch.cuda.is_available() else "cpu"

model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
loss_fn = nn.CrossEntropyLoss()

# (1) Resume: load what an earlier run saved, if anything.
checkpoint_file = os.path.join(nightshift.checkpoint_dir(), "train.pt")
start_epoch, start_batch = 0, 0
if os.path.exists(checkpoint_file):
    saved = torch.load(checkpoint_file, map_location=device)
    model.load_state_dict(saved["model"])
    optimizer.load_state_dict(saved["optimizer"])
    start_epoch, start_batch = saved["epoch"], saved["batch"]
    print(f"resumed at epoch {start_epoch}, batch {start_batch}", flush=True)

for epoch in range(start_epoch, EPOCHS):
    first = start_batch if epoch == start_epoch else 0
    for batch in range(first, BATCHES):
        inputs = torch.randn(128, 64, device=device)
        targets = torch.randint(0, 10, (128,), device=device)
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        step = epoch * BATCHES + batch
        nightshift.log(step=step, loss=loss.item())

        # (2) Save when asked to (SIGTERM) or when the checkpoint interval has passed.
        if nightshift.should_checkpoint():

            def save(folder, epoch=epoch, batch=batch):
                torch.save(
                    {
                        "model": model.state_dict(),
                        "optimizer": optimizer.state_dict(),
                        "epoch": epoch,
                        "batch": batch + 1,
                    },
                    os.path.join(folder, "train.pt"),
                )

            # (3) Exit with the checkpoint code: HTCondor starts the script again.
            nightshift.checkpoint_and_exit(save)

os.makedirs("outputs", exist_ok=True)
torch.save(model.state_dict(), "outputs/model.pt")
print("finished", flush=True)
