"""The options several commands take, defined once, with defaults read from the config
dataclasses so that `--help` states what a run does."""

from __future__ import annotations

from bertdata.config import MASKING_SCHEMES, BuildConfig, InstanceConfig

# InstanceConfig's fields as flags: (metavar, help without the default). Each flag's
# name, type and default come from the field.
INSTANCE_OPTIONS = {
    "max_seq_length": ("N", "tokens per instance, [CLS] and [SEP]s included"),
    "max_predictions_per_seq": ("N", "most masked tokens per instance"),
    "masked_lm_prob": ("P", "fraction of tokens to predict"),
    "short_seq_prob": ("P", "chance a document aims at a random shorter length"),
    "dupe_factor": ("N", "passes over the documents, each with new masks"),
    "random_seed": ("N", "seed of the random stream that shuffles and masks"),
    "masking_scheme": ("{" + ",".join(MASKING_SCHEMES) + "}",
                       "token: mask word pieces one at a time, as NVIDIA's script; whole-word: all pieces of a "
                       "word or none, as Google's --do_whole_word_mask (same instances, bit for bit). A word is a "
                       "piece and the '##' pieces after it, in any language: text without spaces (Chinese, which "
                       "the tokenizer splits into characters) has a word per character"),
}
# Flags that take one of a few values.
CHOICES = {"masking_scheme": MASKING_SCHEMES}
# Set by `build --phase` rather than by flags.
PHASE_FIELDS = ("max_seq_length", "max_predictions_per_seq")


def add_instance_options(parser, *, phase_fields: bool = True) -> None:
    """One flag per InstanceConfig field; `phase_fields=False` leaves out the two a phase sets."""
    defaults = InstanceConfig()
    for name, (metavar, text) in INSTANCE_OPTIONS.items():
        if name in PHASE_FIELDS and not phase_fields:
            continue
        value = getattr(defaults, name)
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value, metavar=metavar,
                            choices=CHOICES.get(name), help=f"{text} (default: {value})")


def instance_fields(args) -> dict:
    """The InstanceConfig fields among `args`: those `add_instance_options` added."""
    return {name: getattr(args, name) for name in INSTANCE_OPTIONS if hasattr(args, name)}


def add_tokenizer_options(parser, vocab_default: str) -> None:
    """--vocab and --cased, as the commands that tokenize take them."""
    parser.add_argument("--vocab", metavar="PATH", help=f"WordPiece vocab.txt (default: {vocab_default})")
    add_cased_option(parser, "for a cased vocab")


def add_cased_option(parser, purpose: str) -> None:
    parser.add_argument("--cased", action="store_true",
                        help=f"keep case and accents ({purpose}); by default text is lower-cased and "
                             "accents stripped, as for uncased BERT")


def add_dump_options(parser) -> None:
    """--wiki, --date and --mirror: which Wikimedia dump run to download."""
    parser.add_argument("--wiki", default=BuildConfig.wiki, metavar="DBNAME",
                        help=f"the wiki's database name: enwiki, simplewiki, dewiki, bgwiki, ... "
                             f"(default: {BuildConfig.wiki})")
    parser.add_argument("--date", default=BuildConfig.date, metavar="YYYYMMDD|latest",
                        help=f"dump run date, as in the run's directory name (default: {BuildConfig.date})")
    parser.add_argument("--mirror", default=BuildConfig.mirror, metavar="URL",
                        help=f"dumps site or a mirror with the same layout (default: {BuildConfig.mirror})")


def add_config_flag(parser, cls, name: str, text: str, default_text: str | None = None, **options) -> None:
    """`--name` for the field `name` of the config dataclass `cls`. The flag's own default is
    None (left out), so the dataclass's default holds; the help states that default, read from
    the field (or `default_text`, for a default computed at run time). A bool field is a switch."""
    import dataclasses

    spec = next(f for f in dataclasses.fields(cls) if f.name == name)
    default = spec.default if spec.default is not dataclasses.MISSING else None
    if isinstance(default, bool):
        options.setdefault("action", "store_true")
    elif default is not None:
        options.setdefault("type", type(default))
    shown = default_text if default_text is not None else (None if default is None or default is False else default)
    parser.add_argument(f"--{name.replace('_', '-')}", dest=name, default=None,
                        help=text + (f" (default: {shown})" if shown is not None else ""), **options)
