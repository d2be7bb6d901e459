"""Pictures drawn by the course (no pasted images)."""
from __future__ import annotations


def rmsnorm_tiling(M: int = 6, N: int = 11, block_n: int = 16, rows_per_program: int = 2):
    """How programs map onto an M x N matrix: one row per program vs several rows per program.

    Cells past N (up to BLOCK_N) are the masked lanes: loaded as 0, never stored.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    cmap = plt.get_cmap("tab10")
    for ax, rpp, title in ((axes[0], 1, "one row per program (grid = M)"),
                           (axes[1], rows_per_program, f"{rows_per_program} rows per program (grid = cdiv(M, {rows_per_program}))")):
        for r in range(M):
            pid = r // rpp
            for c in range(block_n):
                masked = c >= N
                ax.add_patch(Rectangle((c, M - 1 - r), 1, 1, facecolor="white" if masked else cmap(pid % 10),
                                       alpha=1.0 if masked else 0.55, edgecolor="gray", lw=0.5,
                                       hatch="//" if masked else None))
            if r % rpp == 0:
                ax.text(-0.4, M - 1 - r + 0.5 - (rpp - 1) / 2, f"pid {pid}", ha="right", va="center", fontsize=8)
        ax.axvline(N, color="black", lw=1.5)
        ax.text(N + 0.1, M + 0.15, "N", fontsize=9)
        ax.text(block_n - 0.1, M + 0.15, "BLOCK_N", fontsize=9, ha="right")
        ax.set_xlim(-3, block_n + 0.2)
        ax.set_ylim(-0.2, M + 0.8)
        ax.set_aspect("equal")
        ax.axis("off")
        ax.set_title(title, fontsize=10)
    fig.suptitle("Each colour is one Triton program; hatched lanes are masked (cols >= N)", fontsize=10)
    fig.tight_layout()
    return fig
