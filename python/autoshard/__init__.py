"""autoshard's Python side: a torch.export front end that writes a training
step in the `train` dialect (autoshard.torch), HuggingFace helpers
(autoshard.hf) and the writer of the training binary's data files
(autoshard.data).

The compiler and the training binaries are C++ (shard-opt, shard-compile);
this package only captures a PyTorch model and moves tensors in and out.
"""

__all__ = ["data", "hf", "torch"]
