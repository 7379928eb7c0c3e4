"""torch.optim: optimizers over torch tensors' gradients."""
