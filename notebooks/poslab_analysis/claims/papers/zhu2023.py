"""Zhu et al. 2023, PoSE: fine-tuning at L with skipping position ids extends a RoPE model to L'
as well as fine-tuning at L' does, and far better than random position ids (RandPos). Table 1:
LLaMA-7B, 2k -> 16k with linear PI, perplexity on GovReport at 2k, 4k, 8k and 16k (every length
from L to L'); the PoSE study reads 64 -> 256 bytes at 64, 128, 192 and 256."""
from poslab_analysis.claims.rules import AT_MOST_005, BELOW_ZERO
from poslab_analysis.statistics.seeds import paired

NAME = "Zhu et al. 2023"


def pose(study, record=None):
    def minus(a, b):  # [(length, interval of a - b over seeds)] from L to L'
        return [(n, paired(study.loss(a, n), study.loss(b, n))) for n in study.lengths]

    return [
        study.row("PoSE fine-tuned at L reaches the quality of fine-tuning at L' (s = 4)", NAME,
                  "perplexity from L to L' (PoSE 4.84 to 4.60, full length 4.87 to 4.59); "
                  "here the loss at every length read", "pose_pi minus ft256_pi",
                  minus("pose_pi", "ft256_pi"),
                  "at every length, upper end <= 0.05 agrees, lower end > 0.05 disagrees",
                  AT_MOST_005, record),
        study.row("PoSE beats RandPos (s = 4)", NAME,
                  "perplexity from L to L' (PoSE 4.60 to 4.84, RandPos 11.63 to 15.16); here the "
                  "loss at every length read, plain positions", "pose_pi minus randpos_pi",
                  minus("pose_pi", "randpos_pi"), "at every length, interval below 0",
                  BELOW_ZERO, record),
    ]
