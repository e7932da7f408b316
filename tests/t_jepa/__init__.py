"""Tests of T-JEPA (hf_jepa/modeling/t_jepa and its recipe, pipeline, cards and Hub sharing); a package, so test files of different families may share a name."""
