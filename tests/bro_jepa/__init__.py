"""Tests of BRo-JEPA (hf_jepa/modeling/bro_jepa and its recipe, pipeline, Hub sharing and reproduction); a package, so test files of different families may share a name."""
