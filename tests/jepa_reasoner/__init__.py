"""Tests of the JEPA-Reasoner family (hf_jepa/modeling/jepa_reasoner and its recipes, pipeline, Hub sharing, studies); a package, so test files of different families may share a name."""
