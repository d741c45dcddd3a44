"""A tiny GAN on fake or folder images: `python main.py --dataset fake --niter 1` (as a README runs it)."""
import argparse
import os

import torch
import torch.nn as nn

from models import create_model

parser = argparse.ArgumentParser()
parser.add_argument('--dataset', default='fake', choices=['fake', 'folder', 'mnist'], help='where the images come from')
parser.add_argument('--dataroot', default='./data', help='path to the image folder (--dataset folder)')
parser.add_argument('--imageSize', type=int, default=16, help='the height / width of the images')
parser.add_argument('--netG', default='dcgan', help='the generator, by its name in models.py')
parser.add_argument('--nz', type=int, default=8, help='size of the latent z vector')
parser.add_argument('--niter', type=int, default=2, help='number of epochs to train for')
parser.add_argument('--device', default='cuda', help='the device to train on (cuda, cpu)')
opt = parser.parse_args()
print(opt, flush=True)

assert opt.imageSize % 16 == 0, "imageSize must be a multiple of 16"
device = torch.device(opt.device)

if opt.dataset == 'folder':
    names = sorted(os.listdir(opt.dataroot))
    images = torch.stack([torch.load(os.path.join(opt.dataroot, n)) for n in names])
else:
    images = torch.rand(64, opt.imageSize * opt.imageSize) * 2 - 1

netG = create_model(opt.netG, nz=opt.nz, size=opt.imageSize).to(device)
netD = nn.Sequential(nn.Linear(opt.imageSize * opt.imageSize, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
optD = torch.optim.Adam(netD.parameters(), lr=2e-4)
optG = torch.optim.Adam(netG.parameters(), lr=2e-4)
bce = nn.BCEWithLogitsLoss()
for epoch in range(opt.niter):
    for i in range(0, len(images), 16):
        real = images[i:i + 16].to(device)
        fake = netG(torch.randn(len(real), opt.nz, device=device))
        lossD = bce(netD(real), torch.ones(len(real), 1, device=device)) + \
            bce(netD(fake.detach()), torch.zeros(len(real), 1, device=device))
        optD.zero_grad()
        lossD.backward()
        optD.step()
        lossG = bce(netD(fake), torch.ones(len(real), 1, device=device))
        optG.zero_grad()
        lossG.backward()
        optG.step()
    print(f'[{epoch}/{opt.niter}] Loss_D: {lossD.item():.4f} Loss_G: {lossG.item():.4f}', flush=True)
