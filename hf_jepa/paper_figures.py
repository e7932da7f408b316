"""The papers' published figures, in one place: reproductions, diagnostics and model cards quote them from here.

Sources: ../shared/docs/papers/ and anchors.md (the papers' own numbers; ours are measured by `hf-jepa reproduce`).
This module imports nothing, so every layer of the package may use it.
"""

# EPM-JEPA: D_shift after n = 50 experience steps per track (A vanilla, B experience injection, C EPM), and the
# pre-registered threshold (percent) separating outcome classes A / B / C.
EPM_JEPA_D_SHIFT = {"vanilla": 0.8000, "ei": 0.8238, "epm": 0.7848}
EPM_JEPA_D_SHIFT_STD = {"epm": 0.0078}
EPM_JEPA_OUTCOME_THRESHOLD_PERCENT = 5.0
# The paper's relative improvements (percent of the other track's D_shift) as published, from unrounded D_shift.
EPM_JEPA_C_VS_B_PERCENT = 4.74
EPM_JEPA_C_VS_A_PERCENT = 1.90
# EPM-JEPA: sigma_embed of the predicted latents below this is the paper's output-manifold safety warning.
EPM_JEPA_SIGMA_EMBED_SAFETY_THRESHOLD = 0.5

# T-JEPA ("The JEPA paradox in language", C4 / BERT-Large): the MI proxy stays below this ceiling, validation loss
# diverges near this step, and the collapsed validation embeddings have this effective rank.
T_JEPA_MI_CEILING_NATS = 0.35
T_JEPA_DIVERGENCE_STEP = 9_340
T_JEPA_COLLAPSED_VAL_RANK = 1.57

# JEPA-Reasoner: binary-tree search accuracy of reasoner + Talker, GSM8K 8-shot of the 0.9B reasoner and of the
# coupled transformer of the same size.
JEPA_REASONER_TREE_SEARCH_ACCURACY = 0.9987
JEPA_REASONER_GSM8K_8SHOT = 0.519
JEPA_REASONER_GSM8K_8SHOT_COUPLED = 0.208
# In-context scaling from 5 to 8 shots as the summary states it: the reasoner "improves by 131.7%" (relative), the
# coupled transformer by "0.1%" (a plateau; relative or in points, the summary does not say). The 5-shot accuracies
# are not given; 8-shot / (1 + gain) derives them (~22.4% and ~20.8%).
JEPA_REASONER_GSM8K_5_TO_8_SHOT_GAIN = 1.317
JEPA_REASONER_GSM8K_5_TO_8_SHOT_GAIN_COUPLED = 0.001
