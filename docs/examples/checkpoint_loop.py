"""Checkpointing any loop with the nightshift helper: the state is a small JSON file.

Counts to STEPS, one step per 0.1 s, logging a metric per step. Evict it at any moment:
it saves the step it reached, and the next run continues from there.
"""

import json
import os
import time

import nightshift

STEPS = int(os.environ.get("STEPS", "600"))
state_file = os.path.join(nightshift.checkpoint_dir(), "state.json")

step, total = 0, 0.0
if os.path.exists(state_file):
    with open(state_file) as handle:
        saved = json.load(handle)
    step, total = saved["step"], saved["total"]
print(f"starting at step {step}", flush=True)

while step < STEPS:
    time.sleep(0.1)  # the real work of one step
    step += 1
    total += step
    nightshift.log(step=step, total=total)
    if nightshift.should_checkpoint():

        def save(folder, step=step, total=total):
            with open(os.path.join(folder, "state.json"), "w") as handle:
                json.dump({"step": step, "total": total}, handle)

        nightshift.checkpoint_and_exit(save)

os.makedirs("outputs", exist_ok=True)
with open("outputs/result.json", "w") as handle:
    json.dump({"steps": step, "total": total}, handle)
print("finished", flush=True)
