"""Suite-wide test settings."""

import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def one_torch_thread():
    """The tests run tiny models: a second OpenMP thread on 2 shared cores only spins (and can
    make a step several times slower). Stages started as subprocesses choose their own."""
    torch.set_num_threads(1)
