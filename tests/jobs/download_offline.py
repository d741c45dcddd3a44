"""Downloads its pretrained weights at start, as `from_pretrained` or torch.hub do; on a machine that cannot
reach the host the download fails (`download-failed`). The host is under .invalid, which never resolves."""
import sys
import urllib.request

URL = "https://models.dfdoctor.invalid/resnet18/weights.pth"

print(f'Downloading: "{URL}" to /tmp/weights.pth', file=sys.stderr, flush=True)  # as torch.hub prints it
with urllib.request.urlopen(URL, timeout=10) as r:
    weights = r.read()
print("training", flush=True)
