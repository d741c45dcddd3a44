#!/bin/bash
# README: ./distributed_train.sh 2 --data-dir data --model tiny --epochs 1
NUM_PROC=$1
shift
torchrun --nproc_per_node=$NUM_PROC train.py "$@"
