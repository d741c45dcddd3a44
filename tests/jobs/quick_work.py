"""A fast healthy job whose last line sounds like a refusal, which must stay `ok` (the other side of
`did-nothing`). `saves`: writes out/model.bin, then says it skips its logger. `steps`: prints two steps with a
falling loss, then says it skips evaluation."""
import os
import sys

if sys.argv[1:] == ["saves"]:
    os.makedirs("out", exist_ok=True)
    with open(os.path.join("out", "model.bin"), "wb") as f:
        f.write(b"\0" * 1024)
    print("saved out/model.bin")
    print("wandb not installed: skipping logging")
else:
    for step, loss in ((1, 0.52), (2, 0.41)):
        print(f"step {step} loss {loss}")
    print("no validation set given: skipping evaluation")
