"""Train a tiny classifier: `python src/train.py` from anywhere (the root goes on sys.path at run time)."""
import rootutils

rootutils.setup_root(__file__, indicator=".project-root", pythonpath=True)

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from src.data import TinyData  # noqa: E402
from src.model import TinyNet  # noqa: E402


def train(cfg: DictConfig) -> float:
    import torch

    torch.manual_seed(cfg.seed)
    data = TinyData(cfg.data.data_dir, cfg.data.batch_size)
    model = TinyNet(cfg.model.hidden).to(cfg.trainer.device)
    opt = torch.optim.SGD(model.parameters(), lr=cfg.model.lr)
    loss = torch.tensor(0.0)
    for epoch in range(cfg.trainer.max_epochs):
        for x, y in data:
            x, y = x.to(cfg.trainer.device), y.to(cfg.trainer.device)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"epoch {epoch} loss {loss.item():.4f}", flush=True)
    return float(loss.detach())


@hydra.main(version_base="1.3", config_path="../configs", config_name="train.yaml")
def main(cfg: DictConfig) -> float:
    return train(cfg)


if __name__ == "__main__":
    main()
