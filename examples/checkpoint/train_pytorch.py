#!/usr/bin/env python3
"""train_pytorch.py: a minimal PyTorch training loop that follows gpupool's
checkpoint protocol (docs/checkpoints.md), so that a reclaimed or lost GPU
costs at most the steps since the last checkpoint.

    gpupool submit --gpus 1 --time 2h --checkpoint-every 10m -- \\
        python3 /path/to/train_pytorch.py --steps 20000 --save-every 500

What it does, in the order that matters:

1. Installs the checkpoint signal handler first, before `import torch` (which
   can take seconds): until a handler is installed, the checkpoint signal
   (SIGUSR1 by default) kills the process. The handler only sets a flag; the
   loop checks it after every step, saves, and exits with status 0.
2. Restores model, optimizer, LR schedule, step and every RNG state from
   $GPUPOOL_CHECKPOINT_DIR when the marker COMPLETE is there (on a first
   start the directory is empty).
3. Saves every --save-every steps (and every --save-every-s seconds, if
   set): removes COMPLETE, writes train.pt to a temporary file, fsyncs it,
   renames it into place with os.replace, then writes COMPLETE the same way
   with the label "step=N loss=X" that `gpupool checkpoints JOB` shows.

The agent uploads a version only when COMPLETE exists and no file is newer
than it, and never stops the job to do so. Saving is the job's business;
uploading (every --checkpoint-every, on `gpupool checkpoint now`, at the end
and on reclaim) is the agent's.

The data here are synthetic (a fixed random "teacher" network to regress);
replace model, data and loss with yours and keep the rest.
"""

import os
import signal
import sys

# ---- 1. the checkpoint signal, before anything slow --------------------

want_checkpoint = False


def on_checkpoint_signal(signum, frame):
    global want_checkpoint
    want_checkpoint = True


def checkpoint_signal():
    name = os.environ.get("GPUPOOL_CHECKPOINT_SIGNAL", "") or "USR1"
    if not name.startswith("SIG"):
        name = "SIG" + name
    try:
        return signal.Signals[name]
    except KeyError:
        sys.exit("train_pytorch.py: unknown checkpoint signal %r" % name)


signal.signal(checkpoint_signal(), on_checkpoint_signal)

import argparse  # noqa: E402
import random  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
from torch import nn  # noqa: E402

CKPT_NAME = "train.pt"
MARKER = "COMPLETE"


# ---- saving: temporary file, fsync, rename; COMPLETE last --------------

def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(directory, name, write):
    """Calls write(f) on a temporary file in directory, fsyncs it and renames
    it to name: readers see the old file or the new one, never half of one."""
    tmp = os.path.join(directory, ".%s.tmp" % name)
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(directory, name))
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def save(directory, step, loss, model, optimizer, scheduler, data_gen,
         device):
    # The old marker goes first: the directory never shows a COMPLETE beside
    # files it does not vouch for (even within one clock tick).
    try:
        os.unlink(os.path.join(directory, MARKER))
    except FileNotFoundError:
        pass
    state = {
        "step": step,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "rng": {
            "python": random.getstate(),
            "torch": torch.get_rng_state(),
            "cuda": (torch.cuda.get_rng_state_all()
                     if device.type == "cuda" else None),
            "data": data_gen.get_state(),
        },
    }
    write_atomic(directory, CKPT_NAME, lambda f: torch.save(state, f))
    label = "step=%d loss=%.4f\n" % (step, loss)
    write_atomic(directory, MARKER, lambda f: f.write(label.encode()))
    fsync_dir(directory)
    print("saved step=%d" % step, flush=True)


def restore(directory, model, optimizer, scheduler, data_gen, device):
    """Returns the step to resume from (0 when there is no checkpoint)."""
    if not os.path.exists(os.path.join(directory, MARKER)):
        return 0
    path = os.path.join(directory, CKPT_NAME)
    # map_location="cpu": RNG states must be CPU tensors; load_state_dict
    # moves parameters and optimizer state to the model's device. The file
    # holds Python objects (RNG state), hence weights_only=False: load only
    # checkpoints you wrote (gpupool never shows yours to another user).
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=False)
    except TypeError:  # torch < 1.13 has no weights_only
        ckpt = torch.load(path, map_location="cpu")
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    scheduler.load_state_dict(ckpt["scheduler"])
    rng = ckpt["rng"]
    random.setstate(rng["python"])
    torch.set_rng_state(rng["torch"])
    if rng["cuda"] is not None and device.type == "cuda":
        torch.cuda.set_rng_state_all(rng["cuda"])
    data_gen.set_state(rng["data"])
    return int(ckpt["step"])


# ---- the model and the data: replace with yours ------------------------

def make_model(width):
    return nn.Sequential(
        nn.Linear(32, width), nn.GELU(),
        nn.Linear(width, width), nn.GELU(),
        nn.Linear(width, 1),
    )


def batch(teacher, data_gen, size, device):
    x = torch.randn(size, 32, generator=data_gen).to(device)
    with torch.no_grad():
        y = teacher(x)
    return x, y


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--save-every", type=int, default=200,
                    help="save every N steps (0: never by count)")
    ap.add_argument("--save-every-s", type=float, default=0,
                    help="also save every S seconds (0: never by time)")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log-every", type=int, default=100)
    args = ap.parse_args()

    directory = os.environ.get("GPUPOOL_CHECKPOINT_DIR") or "checkpoint"
    os.makedirs(directory, exist_ok=True)
    restart = os.environ.get("GPUPOOL_RESTART_COUNT", "0")

    # The agent sets CUDA_VISIBLE_DEVICES to the GPUs it gave the job, so
    # "cuda" (cuda:0) is the first of those.
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    print("attempt=%s restart=%s checkpoint_version=%s device=%s "
          "CUDA_VISIBLE_DEVICES=%s" % (
              os.environ.get("GPUPOOL_ATTEMPT", "?"), restart,
              os.environ.get("GPUPOOL_CHECKPOINT_VERSION", "0"), device,
              os.environ.get("CUDA_VISIBLE_DEVICES", "")), flush=True)

    random.seed(args.seed)
    torch.manual_seed(args.seed)
    teacher = make_model(64).to(device)  # fixed by the seed: the "dataset"
    model = make_model(args.width).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
        optimizer, T_max=max(args.steps, 1))
    data_gen = torch.Generator().manual_seed(args.seed + 1)
    loss_fn = nn.MSELoss()

    step = restore(directory, model, optimizer, scheduler, data_gen, device)
    if step:
        print("resumed at step %d (restart %s)" % (step, restart), flush=True)
    else:
        print("starting at step 0", flush=True)

    saved, loss, last_save_t = step, float("nan"), time.monotonic()
    model.train()
    while step < args.steps and not want_checkpoint:
        x, y = batch(teacher, data_gen, args.batch_size, device)
        optimizer.zero_grad(set_to_none=True)
        out = loss_fn(model(x), y)
        out.backward()
        optimizer.step()
        scheduler.step()
        step += 1
        loss = out.item()  # also waits for the GPU: the step is done
        if args.log_every and step % args.log_every == 0:
            print("step %d loss %.5f lr %.2e" % (
                step, loss, scheduler.get_last_lr()[0]), flush=True)
        due = args.save_every and step % args.save_every == 0
        due = due or (args.save_every_s and
                      time.monotonic() - last_save_t >= args.save_every_s)
        if due:
            save(directory, step, loss, model, optimizer, scheduler,
                 data_gen, device)
            saved, last_save_t = step, time.monotonic()

    if saved != step or not os.path.exists(os.path.join(directory, MARKER)):
        save(directory, step, loss, model, optimizer, scheduler, data_gen,
             device)
    if step < args.steps:
        # Asked to checkpoint and exit: status 0. The agent sent the signal,
        # so it records this attempt as reclaimed and requeues the job.
        print("checkpoint signal at step %d: saved, exiting" % step,
              flush=True)
        return 0
    print("done steps=%d" % args.steps, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
