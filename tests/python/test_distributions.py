"""torch.distributions in compiled code. Under torch.compile TorchDynamo turns argument validation
off process-wide (Distribution.set_default_validate_args(False)) and captures the distribution's
Python; the capture cases are in python_cases_copy.py. With validation on, the check branches on
tensor values: dynview breaks there and raises eager's ValueError for invalid arguments."""
import pytest
import torch

import dynview

pytestmark = pytest.mark.usefixtures("fresh_engine")


def normal_log_prob(x, scale):
    return torch.distributions.Normal(x.mean(), scale).log_prob(x)


@pytest.fixture
def validation_on():
    old = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(True)
    yield
    torch.distributions.Distribution.set_default_validate_args(old)


def test_validation_breaks_on_the_value_check(validation_on):
    dynview._C.take_records()
    x, scale = torch.randn(4), torch.tensor(2.0)
    torch.testing.assert_close(dynview.compile(normal_log_prob, backend="eager")(x, scale), normal_log_prob(x, scale))
    reasons = [(r["break_id"], r["break_message"]) for r in dynview._C.take_records() if r["break_id"]]
    assert any(i == "DV0002" and "distributions" in m for i, m in reasons), reasons


def test_invalid_argument_raises_eagers_error(validation_on):
    cf = dynview.compile(normal_log_prob, backend="eager")
    x = torch.randn(4)
    with pytest.raises(ValueError, match="scale"):
        normal_log_prob(x, torch.tensor(-1.0))
    with pytest.raises(ValueError, match="scale"):
        cf(x, torch.tensor(-1.0))
