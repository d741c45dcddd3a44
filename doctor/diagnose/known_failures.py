"""The exceptions real training jobs die of, as data: the message, the true cause, and the fix in the user's terms.

Each row was collected from a public tracker thread (its `source`) where users hit the message and the answer was
found. A row matches on the exception's own words (and the exception type where the words alone are ambiguous);
its summary blames the job's own line (`{blame}`: the deepest frame outside the standard library and installed
packages), never the library frame, which stays as evidence. Rows whose fix depends on the project (which flag
overrides the device, which script creates a missing file) name a refiner in doctor/diagnose/user_terms.py.

Every row is proven in tests/test_known_failures.py: by a real job where it can run on a CPU machine, and by its
recorded traceback (tests/samples/tracebacks/<key>.txt) otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from dfdoctor import causes
from dfdoctor.diagnose.rules_runtime import Context, Finding
from dfdoctor.diagnose.traceback import PyError
from dfdoctor.lazy_re import compile_later


@dataclass(frozen=True)
class Known:
    """One known failure: how to recognise it, what it means, and what to do."""

    key: str  # stable name of the row (and of its recorded traceback)
    cause: str
    pattern: str  # a regular expression searched in the exception's text and the lines printed with it
    summary: str  # one sentence; {blame} is the job's own line, {m1}.. the pattern's groups
    fix: str
    source: str  # a public thread where the message and its answer are
    types: tuple[str, ...] = ()  # exception types it applies to (the last dotted part), when the words are ambiguous
    refine: Optional[str] = None  # a function of user_terms that puts the fix in the project's own terms


K = Known
# Rows whose message and answer are common knowledge in the trackers, but whose thread was not re-read for this
# table: they name no thread rather than one nobody checked.
UNCHECKED = "public reports of this message (no single thread checked)"
CORPUS: tuple[Known, ...] = (
    # ---- no GPU where the job asks for one ---------------------------------------------------------------
    K("torch-not-compiled-with-cuda", causes.CUDA_UNAVAILABLE, r"Torch not compiled with CUDA enabled",
      "The job asked for a GPU at {blame}, but this torch is a CPU-only build.",
      "Run on the CPU (set the job's device to 'cpu'), or install a CUDA build of torch (from "
      "https://download.pytorch.org/whl/cu12X) on a machine with a GPU.",
      "https://github.com/karpathy/nanoGPT/issues/281", refine="cuda_device"),
    # torch 2.9+ for an integer device (`model.to(0)`, PyTorch's DDP tutorial) where no accelerator is built in
    K("no-accelerator", causes.CUDA_UNAVAILABLE, r"Cannot access accelerator device when none is available",
      "The job asked for a GPU at {blame} (a device index such as model.to(0)), but this torch has no "
      "accelerator: a CPU-only build, or no GPU visible.",
      "Run on the CPU (give the job the device 'cpu' instead of the index), or install a CUDA build of torch on a "
      "machine with a GPU.", UNCHECKED, types=("RuntimeError",), refine="cuda_device"),
    K("cuda-call-on-cpu-build", causes.CUDA_UNAVAILABLE, r"module 'torch\._C' has no attribute '_cuda_\w+'",
      "The job made a CUDA call at {blame}, and this torch is a CPU-only build (it has no CUDA functions).",
      "Run on the CPU (skip torch.cuda calls when the device is 'cpu'), or install a CUDA build of torch on a "
      "machine with a GPU.", "https://github.com/ShomyLiu/pytorch-relation-extraction/issues/58",
      types=("AttributeError",), refine="cuda_device"),
    # torch.Generator(device='cuda') on a CPU-only build: a long message about linkers, not about the GPU asked for
    K("cuda-generator-on-cpu-build", causes.CUDA_UNAVAILABLE, r"Cannot get CUDA generator without ATen_cuda library",
      "The job asked for a CUDA random generator at {blame}, and this torch is a CPU-only build (it has no CUDA "
      "library; the message's advice about linkers is for people building torch).",
      "Run on the CPU (create the generator on the device 'cpu'), or install a CUDA build of torch on a machine "
      "with a GPU.", UNCHECKED, types=("RuntimeError",), refine="cuda_device"),
    K("no-nvidia-driver", causes.CUDA_UNAVAILABLE, r"Found no NVIDIA driver on your system",
      "The job asked for a GPU at {blame}, but no NVIDIA driver is loaded on this machine.",
      "Run where a GPU and its driver are (nvidia-smi must list it; in a container, start it with --gpus all), "
      "or set the job's device to 'cpu'.", "https://github.com/ShuweiShao/AF-SfMLearner/issues/39", refine="cuda_device"),
    K("no-cuda-gpus", causes.CUDA_UNAVAILABLE, r"No CUDA GPUs are available",
      "The job asked for a GPU at {blame}, but none is visible to it.",
      "Check CUDA_VISIBLE_DEVICES (an empty or wrong value hides every GPU) and that the container or Slurm job "
      "was given GPUs (--gpus, --gres=gpu:N); or set the job's device to 'cpu'.",
      UNCHECKED, refine="cuda_device"),
    K("lightning-no-gpu", causes.CUDA_UNAVAILABLE,
      r"(?:CUDAAccelerator|GPUAccelerator)` can not run on your system|You requested gpu.*but your machine only has|"
      r"No supported gpu backend found",
      "The Trainer was asked for GPUs at {blame}, but torch sees none.",
      "Pass accelerator='cpu' (or 'auto') and devices=1 to the Trainer, or run where torch.cuda.is_available().",
      UNCHECKED),
    K("cuda-driver-too-old", causes.CUDA_INIT_FAILED,
      r"The NVIDIA driver on your system is too old|CUDA driver version is insufficient for CUDA runtime version",
      "CUDA could not start at {blame}: the GPU driver is older than the CUDA this torch was built for.",
      "Install the torch build for the CUDA the driver supports (nvidia-smi shows it top right: e.g. "
      "--index-url https://download.pytorch.org/whl/cu118), or upgrade the driver.",
      UNCHECKED),
    # ---- NCCL --------------------------------------------------------------------------------------------
    K("nccl-not-built", causes.NCCL_FAILED, r"Distributed package doesn't have NCCL built in",
      "The process group could not form at {blame}: it asks for the NCCL backend, which this torch does not have "
      "(a CPU-only or Windows/macOS build).",
      "On CPUs use the gloo backend (init_process_group(backend='gloo')); for NCCL install a CUDA build of torch "
      "on a Linux machine with GPUs.", "https://github.com/pytorch/pytorch/issues/159742", refine="nccl_backend"),
    K("nccl-no-gpus", causes.NCCL_FAILED, r"ProcessGroupNCCL is only supported with GPUs, no GPUs found",
      "The process group could not form at {blame}: NCCL needs a GPU per rank and none is visible.",
      "Use the gloo backend on CPUs, or run where each rank has a GPU.",
      UNCHECKED, refine="nccl_backend"),
    K("nccl-duplicate-gpu", causes.NCCL_FAILED, r"Duplicate GPU detected",
      "Two ranks used the same GPU at {blame}.",
      "Bind each rank to its own GPU before any CUDA work: torch.cuda.set_device(int(os.environ['LOCAL_RANK'])), "
      "and start no more ranks per node than GPUs.", UNCHECKED),
    K("nccl-error", causes.NCCL_FAILED,
      r"NCCL error[^\n]*(?:unhandled system error|unhandled cuda error|internal error|invalid usage|remote process)|"
      r"nccl(?:UnhandledCuda|System|Internal|InvalidUsage)Error",
      "NCCL failed at {blame}.",
      "Run once with NCCL_DEBUG=INFO: its last WARN line names the cause (shared memory too small in a container: "
      "--shm-size or --ipc=host; a wrong network interface: NCCL_SOCKET_IFNAME; P2P over a broken link: "
      "NCCL_P2P_DISABLE=1 to confirm). `dfdoctor check --only cuda.nccl` reproduces it without the job.",
      UNCHECKED),
    # ---- the distributed environment ---------------------------------------------------------------------
    K("env-var-expected", causes.DISTRIBUTED_ENV_MISSING,
      r"environment variable (RANK|WORLD_SIZE|MASTER_ADDR|MASTER_PORT|LOCAL_RANK) expected, but not set",
      "The job called init_process_group at {blame} without the variables torchrun sets ({m1} is missing).",
      "Start it with torchrun (torchrun --standalone --nproc_per_node=N SCRIPT ...), which sets RANK, WORLD_SIZE, "
      "MASTER_ADDR and MASTER_PORT; for one process, set RANK=0 WORLD_SIZE=1 MASTER_ADDR=localhost "
      "MASTER_PORT=29500.", "https://github.com/bubbliiiing/yolov4-pytorch/issues/313"),
    K("rank-keyerror", causes.DISTRIBUTED_ENV_MISSING, r"^KeyError: '(RANK|LOCAL_RANK|WORLD_SIZE|MASTER_ADDR|"
      r"MASTER_PORT|LOCAL_WORLD_SIZE|SLURM_PROCID)'",
      "The job reads {m1} at {blame}, which only a launcher (torchrun, srun) sets.",
      "Start it with torchrun (or srun for SLURM_*), or read it with a default: "
      "int(os.environ.get('{m1}', 0)).", "https://github.com/open-mmlab/mmaction/issues/181",
      types=("KeyError",)),
    K("process-group-not-initialized", causes.DISTRIBUTED_ENV_MISSING,
      r"Default process group has not been initialized",
      "The job used a distributed call at {blame} before init_process_group ran.",
      "Call torch.distributed.init_process_group(...) first (under torchrun), or guard the call with "
      "torch.distributed.is_initialized() for single-process runs.",
      "https://github.com/megvii-model/YOLOF/issues/11"),
    K("port-in-use", causes.PORT_IN_USE,
      r"Address already in use|EADDRINUSE|server socket has failed to (?:listen|bind)",
      "The rendezvous port is taken (at {blame}): another job, or a previous run of this one, listens on it.",
      "Pick a free port: torchrun --master_port=PORT (or --rdzv-endpoint=localhost:0 with --standalone), or "
      "stop the leftover run (`dfdoctor check --only job.leftovers` finds it).",
      "https://github.com/chenbinghui1/DSL/issues/28"),
    # ---- packages that do not belong together ------------------------------------------------------------
    K("torchvision-operator-missing", causes.DEPENDENCY_MISMATCH,
      r"operator torchvision::(\w+) does not exist|No such operator torchvision::(\w+)",
      "torchvision's compiled operators did not load (at {blame}): torchvision was not built for this torch "
      "(versions not paired, or a CUDA torchvision beside a CPU torch).",
      "Install the torchvision paired with the installed torch, from torch's own index.",
      "https://github.com/pytorch/pytorch/issues/122494", refine="torch_pair"),
    K("torchvision-cuda-major", causes.DEPENDENCY_MISMATCH,
      r"PyTorch and torchvision were compiled with different CUDA (?:major )?versions",
      "torch and torchvision were built for different CUDA versions (at {blame}).",
      "Install both from one index, as a pair.", UNCHECKED,
      refine="torch_pair"),
    K("extension-undefined-symbol", causes.DEPENDENCY_MISMATCH, r"undefined symbol: (_Z\w+)",
      "A compiled extension imported at {blame} was built against another torch (undefined symbol {m1}).",
      "Rebuild or reinstall the extension against the installed torch (pip install --no-build-isolation "
      "--force-reinstall --no-cache-dir PACKAGE, or the wheel built for this torch and CUDA).",
      UNCHECKED, types=("ImportError", "OSError")),
    K("cuda-library-missing", causes.DEPENDENCY_MISMATCH,
      r"(lib(?:cudart|cublas\w*|cudnn\w*|nccl|torch_cuda\w*|nvrtc)[\w.]*\.so[\w.]*): cannot open shared object file",
      "A CUDA library ({m1}) could not be loaded at {blame}: the installed packages expect another CUDA.",
      "Install torch and its CUDA extensions from one index (the nvidia-* wheels come with torch's own CUDA "
      "build); do not mix a conda cudatoolkit with pip's CUDA wheels.",
      UNCHECKED),
    K("numpy-abi", causes.DEPENDENCY_MISMATCH,
      r"compiled using NumPy 1\.x cannot be run in\s+NumPy 2|numpy\.core\.multiarray failed to import|"
      r"numpy\.dtype size changed, may indicate binary incompatibility",
      "A package imported at {blame} was compiled against another NumPy major version.",
      "Pin numpy<2 for packages not yet built for NumPy 2 (pip install 'numpy<2'), or upgrade that package to a "
      "release built for NumPy 2.", "https://github.com/jupyter/notebook/issues/7522"),
    K("numpy-removed-alias", causes.DEPENDENCY_MISMATCH,
      r"module 'numpy' has no attribute '(float|int|bool|object|str|long|unicode)'",
      "The code at {blame} uses np.{m1}, which NumPy 1.24 removed.",
      "Use the builtin ({m1}) or np.{m1}64/np.{m1}_ at that line, or pin numpy<1.24 for code you cannot change.",
      UNCHECKED),
    # Another version of the package may have the name; only a pin of the project that disagrees with the installed
    # version establishes it (asking the index which versions have a name would mean fetching each version's
    # files): the refiner makes it dependency-mismatch then, and leaves it an import-error otherwise.
    K("cannot-import-name", causes.IMPORT_ERROR,
      r"cannot import name '(\w+)' from '([\w.]+)' \(([^)]*(?:site|dist)-packages[^)]*)\)",
      "{m2} has no {m1} (imported at {blame}); whether another version of {m2top} has it was not established "
      "(no pin of the project disagrees with the installed version).",
      "Check `{m1}` against the documentation of the installed {m2top}; if the code was written for another "
      "version, pin that one in the project's requirements (dfdoctor offers no reinstall, and none was tried).",
      UNCHECKED, types=("ImportError",), refine="pin_disagrees"),
    K("named-install-line", causes.DEPENDENCY_MISSING,
      r"""pip install (?:-U |--upgrade )?["'`]?([A-Za-z0-9][\w.-]*(?:\[[\w,.-]+\])?(?:[<>=!~]=?[\w.*+]+"""
      r"""(?:,[<>=!~]=?[\w.*+]+)*)?)""",
      "The code at {blame} needs {m1}, which is not installed: its own message names the install line.",
      "Install it in the training interpreter as the message says: pip install '{m1}' (the line the library "
      "printed; not tried).",
      UNCHECKED, types=("ImportError", "ModuleNotFoundError", "RuntimeError", "MisconfigurationException",
                        "PackageNotFoundError")),
    K("triton-missing", causes.DEPENDENCY_MISSING, r"Cannot find a working triton installation",
      "torch.compile at {blame} needs Triton for GPU kernels, and it is not installed.",
      "Install the triton that comes with this torch (pip install torch from the CUDA index brings it), or run "
      "without torch.compile.", UNCHECKED),
    # ---- building extensions and compiling ---------------------------------------------------------------
    K("cuda-home-missing", causes.BUILD_ENV_MISSING, r"CUDA_HOME environment variable is not set",
      "Building a CUDA extension at {blame} needs the CUDA toolkit (nvcc), and CUDA_HOME does not point at one.",
      "Install the CUDA toolkit matching torch.version.cuda and export CUDA_HOME=/usr/local/cuda-X.Y (nvcc "
      "must be at $CUDA_HOME/bin/nvcc), or install a prebuilt wheel of the extension.",
      "https://github.com/pytorch/extension-cpp/issues/26"),
    K("ninja-missing", causes.BUILD_ENV_MISSING, r"Ninja is required to load C\+\+ extensions",
      "A C++ extension is compiled at {blame}, which needs ninja.",
      "pip install ninja in the training interpreter.", UNCHECKED),
    K("compiler-missing", causes.BUILD_ENV_MISSING,
      r"InvalidCxxCompiler|No working C compiler found|Failed to find C compiler|gcc: not found|"
      r"(?:g\+\+|c\+\+|cc): No such file or directory",
      "torch.compile (or an extension build) at {blame} needs a C/C++ compiler, and none works here.",
      "Install one (apt-get install build-essential), or run without torch.compile.",
      UNCHECKED, refine="without_compile"),
    K("dynamo-python-unsupported", causes.COMPILE_FAILED,
      r"(?:Dynamo|torch\.compile) is not supported on Python 3\.\d+",
      "torch.compile at {blame} does not support this Python version in the installed torch.",
      "Upgrade torch to a release that supports this Python, use an older Python, or run without torch.compile.",
      UNCHECKED),
    # ---- checkpoints ---------------------------------------------------------------------------------------
    K("checkpoint-on-cuda", causes.CHECKPOINT_INCOMPATIBLE,
      r"Attempting to deserialize object on a CUDA device but torch\.cuda\.is_available\(\) is False",
      "The checkpoint loaded at {blame} was saved from a GPU, and this machine has none.",
      "Load it onto the CPU: torch.load(path, map_location='cpu') at that line (or map_location=device).",
      "https://github.com/hkchengrex/Cutie/issues/37", refine="map_location"),
    K("weights-only-refused", causes.CHECKPOINT_INCOMPATIBLE, r"Weights only load failed",
      "torch.load at {blame} refused the checkpoint: since torch 2.6 it loads tensors only (weights_only=True) "
      "and the file holds other Python objects.",
      "If you trust the file: torch.load(path, weights_only=False) at that line; better, allow the named class "
      "with torch.serialization.add_safe_globals([...]) (the message names it), or save only state_dict()s.",
      "https://github.com/Comfy-Org/ComfyUI/issues/7425", refine="weights_only"),
    K("state-dict-size-mismatch", causes.CHECKPOINT_INCOMPATIBLE,
      r"size mismatch for ([\w.]+): copying a param with shape",
      "The checkpoint loaded at {blame} is for another model shape ({m1} differs).",
      "Build the model with the configuration the checkpoint was trained with (sizes, vocabulary, layers), or "
      "load with strict=False and re-initialise the mismatched layers on purpose.",
      UNCHECKED),
    K("state-dict-keys", causes.CHECKPOINT_INCOMPATIBLE,
      r"Error\(s\) in loading state_dict for \w+:\s*(?:Missing|Unexpected) key",
      "The checkpoint loaded at {blame} has other parameter names than the model.",
      "If the keys differ by a prefix `module.` (saved from DDP/DataParallel) or `_orig_mod.` (saved from "
      "torch.compile), strip it before load_state_dict: {k.removeprefix('module.'): v for k, v in sd.items()}. "
      "Otherwise the checkpoint is for another model.", "https://github.com/pytorch/pytorch/issues/3805",
      refine="state_dict_prefix"),
    K("checkpoint-truncated", causes.CHECKPOINT_INCOMPATIBLE,
      r"PytorchStreamReader failed reading zip archive|failed finding central directory",
      "The checkpoint read at {blame} is cut short or is not a torch file (an interrupted save or download).",
      "Save again (to a temporary name, then rename), or download it again and compare its size/checksum.",
      "https://github.com/CompVis/stable-diffusion/issues/93"),
    K("invalid-load-key", causes.CHECKPOINT_INCOMPATIBLE, r"invalid load key, '(.)'",
      "The file loaded at {blame} is not a checkpoint (a Git LFS pointer, or an HTML page saved in its place).",
      "Look at its first bytes (head -c 200 FILE): `version https://git-lfs` means `git lfs pull`; `<html` "
      "means the download URL needs a token or a direct link.", UNCHECKED),
    # ---- files ---------------------------------------------------------------------------------------------
    K("log-folder-missing", causes.LOG_DIR_MISSING,
      r"No such file or directory: '([^']+)'", "The job opens its log {m1} at {blame}, and its folder does not "
      "exist.", "Create the folder first (mkdir -p FOLDER, or os.makedirs(os.path.dirname(path), "
      "exist_ok=True) before logging.basicConfig / FileHandler).",
      UNCHECKED, types=("FileNotFoundError",), refine="log_file"),
    K("save-folder-missing", causes.OUTPUT_DIR_MISSING,
      r"Parent directory (\S+) does not exist",
      "The job saves to {m1} at {blame}, and that folder does not exist.",
      "Create the folder before saving (os.makedirs(folder, exist_ok=True)), or point the output option at an "
      "existing one.", UNCHECKED, refine="output_dir"),
    K("torchvision-dataset-not-found", causes.INPUT_MISSING,
      r"Dataset not found or corrupted\. You can use download=True to download it",
      "The data set read at {blame} is not on disk.",
      "Pass download=True once where there is network, or copy the data set into the root folder the job names.",
      UNCHECKED),
    K("delete-missing-file", causes.CRASHED, r"No such file or directory: '([^']+)'",
      "The job deletes {m1} at {blame}, and it is not there: the deletion fails, nothing the job reads is missing.",
      "Let the deletion allow a missing file: Path(p).unlink(missing_ok=True), or os.remove(p) inside "
      "try/except FileNotFoundError (dfdoctor did not try this fix).",
      UNCHECKED, types=("FileNotFoundError",), refine="deleted_file"),
    K("input-file-missing", causes.INPUT_MISSING, r"No such file or directory: '([^']+)'",
      "The job reads {m1} at {blame}, and it does not exist.",
      "Create the file first, or point the job at where it is.",
      UNCHECKED, types=("FileNotFoundError",), refine="input_file"),
    # ---- downloads -----------------------------------------------------------------------------------------
    K("hub-gated", causes.HUB_ACCESS_DENIED,
      r"GatedRepoError|Cannot access gated repo|Access to model [\w/.-]+ is restricted|401 Client Error",
      "The model downloaded at {blame} is gated or private, and the job has no accepted token.",
      "Accept the model's terms on its Hugging Face page, then give the job a token: `huggingface-cli login` "
      "for its user, or HF_TOKEN in its environment.", UNCHECKED),
    K("hub-offline", causes.DOWNLOAD_FAILED,
      r"We couldn't connect to 'https://huggingface\.co'|OfflineModeIsEnabled|LocalEntryNotFoundError|"
      r"Can't load (?:tokenizer|config|the model|the configuration|weights) for '([^']+)'",
      "The job loads {m1} from the Hugging Face Hub at {blame}, and it is neither reachable nor in the cache.",
      "Download it where there is network (huggingface-cli download NAME), copy the cache (HF_HOME) here and "
      "run with HF_HUB_OFFLINE=1; or pass a local folder instead of the name; check the name's spelling.",
      UNCHECKED),
    K("dataset-download-failed", causes.DOWNLOAD_FAILED, r"Error downloading ([\w.-]+)|"
      r"RuntimeError: Failed to download|ConnectionError: Couldn't reach",
      "The data set download at {blame} failed: this machine could not reach the server.",
      "Download the files where there is network and copy them into the data folder the job names (then "
      "download=False), or set HTTPS_PROXY.", UNCHECKED),
    # ---- the model code ------------------------------------------------------------------------------------
    K("tensors-on-different-devices", causes.DEVICE_MISMATCH,
      r"Expected all tensors to be on the same device",
      "At {blame}, tensors on different devices meet in one operation.",
      "Move the model and every input to one device (model.to(device); x = x.to(device)); tensors created "
      "inside forward need device=x.device.", UNCHECKED),
    K("input-weight-type", causes.DEVICE_MISMATCH,
      r"Input type \(([\w.]+)\) and weight type \(([\w.]+)\) should be the same",
      "At {blame}, the input ({m1}) and the layer's weights ({m2}) differ in device or dtype.",
      "Move the input to the model's device and dtype (x.to(device, dtype)) before calling the model.",
      UNCHECKED),
    K("matmul-shapes", causes.SHAPE_MISMATCH, r"mat1 and mat2 shapes cannot be multiplied \(([^)]+)\)",
      "At {blame}, a Linear layer got inputs of the wrong width ({m1}).",
      "Make the layer's in_features equal the input's last dimension (the second number of mat1), often a "
      "flatten size computed for another image size.", "https://github.com/THUDM/GraphMAE/issues/51"),
    K("batch-size-mismatch", causes.SHAPE_MISMATCH,
      r"Expected input batch_size \((\d+)\) to match target batch_size \((\d+)\)",
      "At {blame}, the model's output has {m1} rows and the targets {m2}.",
      "Reshape the output so its first dimension is the batch (a view(-1, ...) that folds the batch is the usual "
      "cause).", UNCHECKED),
    K("dtype-mismatch", causes.DTYPE_MISMATCH,
      r"expected scalar type (\w+) but found (\w+)|Found dtype (\w+) but expected (\w+)|"
      r"expected (?:m1|mat1) and (?:m2|mat2) to have the same dtype|mat1 and mat2 must have the same dtype",
      "At {blame}, tensors of different dtypes meet in one operation.",
      "Cast to one dtype (inputs .float(), targets .long() for cross-entropy), or run the op under "
      "torch.autocast.", UNCHECKED),
    K("inplace-modified", causes.AUTOGRAD_ERROR,
      r"one of the variables needed for gradient computation has been modified by an inplace operation",
      "backward() at {blame} found a tensor it needs overwritten in place.",
      "Replace the in-place op (x += y, relu_(), inplace=True) on that tensor with its out-of-place form; "
      "torch.autograd.set_detect_anomaly(True) names the op.", UNCHECKED),
    K("backward-twice", causes.AUTOGRAD_ERROR, r"Trying to backward through the graph a second time",
      "backward() at {blame} ran through a graph already freed by an earlier backward.",
      "Detach what carries over between steps (hidden = hidden.detach()), or pass retain_graph=True only when "
      "two backward passes really share a graph.", UNCHECKED),
    K("no-grad-fn", causes.AUTOGRAD_ERROR,
      r"element 0 of tensors does not require grad and does not have a grad_fn",
      "backward() at {blame} was called on a loss that does not depend on any trainable parameter.",
      "Compute the loss from the model's output outside torch.no_grad(), without .detach()/.item(), and with "
      "parameters that require grad.", UNCHECKED),
    K("target-out-of-bounds", causes.INDEX_OUT_OF_RANGE, r"Target (-?\d+) is out of bounds",
      "The loss at {blame} got the label {m1}, outside the model's classes.",
      "Make the number of output classes cover every label (labels 0..C-1), or remap the labels.",
      UNCHECKED),
    K("embedding-index", causes.INDEX_OUT_OF_RANGE, r"index out of range in self",
      "At {blame}, an index (a token id, a position) is larger than the embedding table.",
      "Make the embedding's size cover every id: the vocabulary size of the tokenizer that made the data "
      "(model.resize_token_embeddings(len(tokenizer)) after adding tokens), and positions < the block size.",
      UNCHECKED, types=("IndexError",)),
    # ---- DataLoader workers --------------------------------------------------------------------------------
    K("worker-pickle", causes.DATALOADER_FAILED,
      r"Can't pickle local object|Can't pickle <function <lambda>|Can't get attribute '(\w+)' on <module '__main__'",
      "DataLoader workers could not receive the dataset at {blame}: it holds a lambda or a local function, "
      "which the spawn start method cannot pickle.",
      "Define the functions the dataset uses (transforms, collate_fn) at module level, or use num_workers=0.",
      UNCHECKED),
    K("missing-main-guard", causes.DATALOADER_FAILED,
      r"An attempt has been made to start a new process before the\s+current process has finished its "
      r"bootstrapping phase",
      "DataLoader workers started at {blame} re-ran the script from the top: it has no main guard.",
      "Put the training code under `if __name__ == \"__main__\":` (needed with the spawn start method: macOS, "
      "Windows, CUDA in workers).", UNCHECKED),
    K("worker-exited", causes.DATALOADER_FAILED,
      r"DataLoader worker \(pids?\(?s?\)? ?[\d, ]+\)? exited unexpectedly",
      "A DataLoader worker died while the job iterated at {blame}.",
      "Run once with num_workers=0: the real error then shows in the main process; a worker killed by the "
      "OOM killer (dmesg) or /dev/shm too small (docker --shm-size) shows no error of its own.",
      UNCHECKED),
    # ---- DDP -----------------------------------------------------------------------------------------------
    K("ddp-unused-parameters", causes.DDP_UNUSED_PARAMETERS,
      r"Expected to have finished reduction in the prior iteration before starting a new one|"
      r"Expected to mark a variable ready only once",
      "DDP waited at {blame} for gradients that some parameters never produced (they did not take part in the "
      "loss), or produced twice.",
      "Pass find_unused_parameters=True to DistributedDataParallel, or make every parameter take part in the "
      "loss; TORCH_DISTRIBUTED_DEBUG=DETAIL names the parameters.",
      "https://github.com/pytorch/pytorch/issues/43259"),
)
# Each row's pattern as classify searches it, compiled at its first search: one object that dfdoctor.kept_code's
# `keep` finds and keeps compiled (regex_code), as it does every compile_later pattern.
_SEARCHED = tuple(compile_later(row.pattern, re.MULTILINE) for row in CORPUS)


def classify(err: PyError, ctx: Context) -> Optional[Finding]:
    """The first row of the corpus that recognises the exception, with the fix in the job's own terms."""
    text = "\n".join([err.headline, *err.after])
    kind = err.exc_type.rsplit(".", 1)[-1]
    for row, searched in zip(CORPUS, _SEARCHED):
        if row.types and kind not in row.types:
            continue
        m = searched.search(text)
        if not m:
            continue
        groups = [g for g in m.groups()]
        found = _finding(row, m, groups, err, ctx)
        if found is not None:
            return found
    return None


def row(key: str) -> Known:
    """The corpus row named `key`."""
    return next(r for r in CORPUS if r.key == key)


def _finding(row: Known, m: re.Match, groups: list, err: PyError, ctx: Context) -> Optional[Finding]:
    """The finding of one matched row: summary and fix filled in, the library frame kept as evidence."""
    from dfdoctor.diagnose import user_terms  # start-up: the project model, read for a fix alone (issue 45)
    named = {f"m{i + 1}": g or "" for i, g in enumerate(groups)}
    named["m2top"] = (named.get("m2") or "").split(".")[0]
    summary = _fill(row.summary, blame=err.blame, **named)
    fix = _fill(row.fix, **named)
    evidence = [f"message: {err.headline[:300]}", *err.library_evidence,
                f"known failure {row.key!r} ({row.source})"]
    refiner = getattr(user_terms, row.refine) if row.refine else None
    if refiner is not None:
        told = refiner(err, ctx, m)
        if told is None:  # the refiner knows this row does not apply (a log, not an input; a write, not a read)
            return None
        summary = told.summary or summary
        fix = told.fix or fix
        evidence += told.evidence
    return Finding(told.cause if refiner is not None and told.cause else row.cause, summary, fix, evidence)


def _fill(template: str, **values: str) -> str:
    """`template` with {name} replaced; braces of code examples in fixes are left alone."""
    return re.sub(r"\{(blame|m\d|m2top)\}", lambda x: values.get(x.group(1), x.group(0)), template)
