"""A job whose start-up prints look busy and repeat, then dies before training, about 6 s in: a model summary
printed at once (48 rows of one shape), four checkpoint shards loaded a second apart, then its data file is not
found. Neither the table nor the shards are the job's loop: a launch must never call it running."""
import time

print("building the model", flush=True)
for i in range(48):
    print(f"layers.{i}.attn.weight [768, 768]", flush=True)
for shard in range(1, 5):
    time.sleep(1.0)
    print(f"Loading checkpoint shard {shard}/4", flush=True)
time.sleep(1.5)
open("data/train.bin", "rb")
