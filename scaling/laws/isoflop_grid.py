"""IsoFLOP approach 2 through each budget's lowest-loss run (the "grid minimum") instead of its parabola's vertex:
the power laws N_opt(C), D_opt(C) and L_opt(C) = E + A·C^(−γ) of scaling/laws/isoflop.py through the best runs. It
needs no parabola to be right, only the sizes to bracket the optimum (the same budgets as the parabola uses)."""

from __future__ import annotations

from scaling.laws.isoflop import IsoflopParabola
from scaling.laws.registry import register


@register
class IsoflopGrid(IsoflopParabola):
    name = "isoflop_grid"
    preference = 2
    title = ("Hoffmann et al. 2022 approach 2 through each budget's best run (grid minimum): N_opt, D_opt power laws "
             "in C, L_opt(C) = E + A*C^-gamma by least squares")
    point = ("grid_n_opt", "grid_d_opt", "grid_loss")
