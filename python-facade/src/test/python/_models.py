"""Small torch.nn models the Python test scripts share."""

import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    """A residual MLP block: RMSNorm, Linear up, GELU, Linear down."""

    def __init__(self, dim=8, hidden=12):
        super().__init__()
        self.norm = nn.RMSNorm(dim)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))
