"""``.island(**options)`` checks its options when the blueprint is built, naming the option: ``name`` names the
island (a string); the others are Ray actor options of the island's actor. ``namespace`` is not one: island actors
are not Ray named actors, so it would be ignored."""
from __future__ import annotations

import pytest

from atoll import Source


def test_an_unknown_option_such_as_namespace_is_refused_naming_it_and_the_allowed_ones():
    with pytest.raises(ValueError, match=r"island\(\): unknown option\(s\) 'namespace'; allowed: accelerator_type, "
                                         r"label_selector, memory, name, num_cpus, num_gpus, resources, runtime_env, "
                                         r"scheduling_strategy$"):
        Source.single(1).island(name="a", namespace="ns")


def test_name_must_be_a_string_and_sizes_numbers_at_least_zero():
    with pytest.raises(ValueError, match=r"island\(\): option 'name' must be a string, got 3"):
        Source.single(1).island(name=3)
    with pytest.raises(ValueError, match=r"island\(\): option 'num_cpus' must be a number >= 0, got -1"):
        Source.single(1).island(num_cpus=-1)


def test_a_named_island_keeps_its_options_as_given():
    from atoll.stage.attributes import AsyncBoundary

    boundary = Source.single(1).island(name="enrich", num_cpus=0.5).attributes.get(AsyncBoundary)
    assert boundary.options == {"name": "enrich", "num_cpus": 0.5}
