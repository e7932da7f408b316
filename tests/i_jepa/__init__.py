"""Tests of I-JEPA (hf_jepa/modeling/i_jepa and its health checks and image pipeline); a package, so test files of different families may share a name."""
