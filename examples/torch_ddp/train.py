#!/usr/bin/env python3
"""train.py: torch.distributed (CPU, Gloo, DDP) on a gpupool gang, with
checkpoints; see README.md beside it. Usage: train.py [STEPS] [STEP_S]"""
import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 30
STEP_S = float(sys.argv[2]) if len(sys.argv) > 2 else 0.2
CKDIR = os.environ.get("GPUPOOL_CHECKPOINT_DIR", "checkpoint")
RANK = int(os.environ.get("RANK", "0"))
WORLD = int(os.environ.get("WORLD_SIZE", "1"))
stop = False


def on_signal(signum, frame):
    global stop
    stop = True


def save(model, step):
    os.makedirs(CKDIR, exist_ok=True)
    tmp = os.path.join(CKDIR, ".model.pt.tmp")
    torch.save({"step": step, "model": model.state_dict()}, tmp)
    os.rename(tmp, os.path.join(CKDIR, "model.pt"))
    tmp = os.path.join(CKDIR, ".COMPLETE.tmp")
    with open(tmp, "w") as f:
        f.write("step=%d\n" % step)
    os.rename(tmp, os.path.join(CKDIR, "COMPLETE"))


def main():
    signal.signal(getattr(signal, "SIG" + os.environ.get(
        "GPUPOOL_CHECKPOINT_SIGNAL", "USR1")), on_signal)
    dist.init_process_group("gloo", init_method="env://", rank=RANK,
                            world_size=WORLD,
                            timeout=datetime.timedelta(seconds=120))
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    start = 0
    if os.path.exists(os.path.join(CKDIR, "COMPLETE")):
        state = torch.load(os.path.join(CKDIR, "model.pt"))
        model.load_state_dict(state["model"])
        start = state["step"]
    # Every rank starts from rank 0's state.
    t = torch.tensor([start])
    dist.broadcast(t, 0)
    start = int(t.item())
    for p in model.parameters():
        dist.broadcast(p.data, 0)
    print("rank %d starting at step %d" % (RANK, start), flush=True)
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    for step in range(start, STEPS):
        g = torch.Generator().manual_seed(1000 * step + RANK)
        x = torch.randn(16, 8, generator=g)
        y = x.sum(dim=1, keepdim=True) * 0.5
        opt.zero_grad()
        loss = ((ddp(x) - y) ** 2).mean()
        try:
            loss.backward()  # DDP all-reduces the gradients here
        except RuntimeError as e:
            # A part is gone: wait for the checkpoint signal (saved).
            print("a part was lost at step %d (%s): waiting for the "
                  "checkpoint signal" % (step, str(e).splitlines()[0]),
                  flush=True)
            end = time.monotonic() + 300
            while not stop and time.monotonic() < end:
                time.sleep(0.1)
            print("checkpoint signal at step %d: saved, exiting" % step,
                  flush=True)
            sys.exit(0 if stop else 1)
        opt.step()
        if RANK == 0:
            save(model, step + 1)
        print("step %d loss %.6f" % (step + 1, loss.item()), flush=True)
        if stop:
            print("checkpoint signal at step %d: saved, exiting" % (step + 1),
                  flush=True)
            sys.exit(0)
        time.sleep(STEP_S)
    if RANK == 0:
        w = [v for p in model.parameters() for v in p.data.flatten().tolist()]
        print("final weights: " + " ".join("%.6f" % v for v in w), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
