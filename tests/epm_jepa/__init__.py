"""Tests of EPM-JEPA (hf_jepa/modeling/epm_jepa and its memory, recipe, pipeline, card and Hub sharing); a package, so test files of different families may share a name."""
