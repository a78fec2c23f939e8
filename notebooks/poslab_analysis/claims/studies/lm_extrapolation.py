"""The language-model extrapolation study (experiments/lm_extrapolation.protocol.md): models
trained on L-byte chunks of each corpus (the study's variants), read on chunks of L x factor.
Its table has one part per corpus: a gate line, then the rows of its papers."""
from poslab_analysis.reading import study_files
from poslab_analysis.statistics import seeds


class Study:
    """What the papers' rows read: the study's summary and loss by position, its training length
    L and its largest factor, and the studies beside it."""

    def __init__(self, study_dir):
        self.dir = study_dir
        self.summary = study_files.read_summary(study_dir)
        self.by_position = study_files.read_loss_by_position(study_dir)
        lengths = self.summary[self.summary["kind"] == "length"]
        self.top = lengths["factor"].max()
        self.train_len = int(lengths[lengths["factor"] == 1]["seq_len"].iloc[0])
        self._siblings = {}

    def sibling(self, name):
        """The summary of study `name` beside this one (read once), or None if it has not run."""
        if name not in self._siblings:
            self._siblings[name] = study_files.read_sibling(self.dir, name,
                                                            family="lm_extrapolation")
        return self._siblings[name]

    def sibling_dir(self, name):
        return study_files.sibling_dir(self.dir, name, family="lm_extrapolation")


def length_rows(summary, corpus):
    rows = summary[(summary["variant"] == corpus) & (summary["kind"] == "length")]
    return rows[seeds.gate_passed(rows)]


def loss_at(summary, encoding, corpus, factor):
    """Gated test loss of `encoding` at `factor`: Series over seeds."""
    rows = length_rows(summary, corpus)
    rows = rows[(rows["encoding.type"] == encoding) & (rows["factor"] == factor)]
    return rows.set_index("train.seed")["loss"].dropna()


def growth(summary, encoding, corpus, factor):
    """Paired over seeds: loss at `factor` x the training length minus loss at 1x."""
    return seeds.t_interval((loss_at(summary, encoding, corpus, factor)
                             - loss_at(summary, encoding, corpus, 1.0)).dropna().tolist())


def table(study_dir, papers, record=None):
    """The claims table: per corpus, the gate line and a table of the papers' rows
    (paper.lm_extrapolation(study, corpus, record) -> lines)."""
    study = Study(study_dir)
    summary = study.summary
    lines = []
    for corpus in list(dict.fromkeys(summary["variant"])):
        runs = summary[(summary["variant"] == corpus)].drop_duplicates("run")
        dropped = runs[~seeds.gate_passed(runs)]
        lines.append(f"\n**{corpus}** (loss in nats/byte, L = {study.train_len} bytes; "
                     f"{len(runs)} runs, gate dropped {len(dropped)}"
                     f"{': ' + ', '.join(dropped['run']) if len(dropped) else ''})\n")
        lines.append(f"| published claim ({', '.join(p.NAME for p in papers)}) | what the paper "
                     f"measured; what the verdict uses | measured | rule | verdict |")
        lines.append("|---|---|---|---|---|")
        for paper in papers:
            lines += paper.lm_extrapolation(study, corpus, record)
    return "\n".join(lines)
