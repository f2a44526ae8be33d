"""`--push-to-hub REPO`: a set and its card uploaded to a Hugging Face dataset repo with huggingface_hub.

`check_hub` runs before any work: a repo id the Hub would refuse, offline mode, no token or a Hub that
cannot be reached is one line then, not after an hour of curating. `push_set` uploads in one commit: a
dataset folder as it is, a file with its card as the repo's README.md (the card's `configs` name the file
by its own name, so the repo loads as the folder does). Repos are made private unless asked otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentdata.errors import UserError
from agentdata.publish.layout import CARD_NAME, SetLayout

REPO_TYPE = "dataset"


@dataclass(frozen=True)
class Pushed:
    repo: str
    private: bool
    files: tuple[str, ...]  # paths in the repo
    url: str

    def as_dict(self) -> dict[str, Any]:
        return {"repo": self.repo, "private": self.private, "files": list(self.files), "url": self.url}


def check_hub(repo: str, flag: str = "--push-to-hub ") -> str:
    """Check, before any work, that `repo` can be pushed to: a valid id, online, a token the Hub accepts;
    returns the user's name. Every failure is one UserError naming `flag` as the command spells it
    (filter's is the key `push_to_hub=`)."""
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import HFValidationError, LocalTokenNotFoundError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(repo)
    except HFValidationError as error:
        raise UserError(f"{flag}{repo}: not a Hub repo id ({str(error).splitlines()[0]})") from None
    if "/" not in repo:
        raise UserError(f"{flag}{repo}: give the repo as OWNER/NAME (your user or organisation, then the name)")
    if constants.is_offline_mode():
        raise UserError(f"{flag}{repo}: the Hub is switched off here (HF_HUB_OFFLINE is set); unset it to push")
    try:
        return HfApi().whoami()["name"]
    except LocalTokenNotFoundError:
        raise UserError(f"{flag}{repo}: no Hugging Face token; log in with `hf auth login` or set HF_TOKEN") from None
    except Exception as error:  # noqa: BLE001 - the one request failed (httpx's transport errors, the Hub's HTTP
        # errors, a proxy's): whatever it was, the push cannot happen, and that is the user's to know now
        reason = f"{type(error).__name__}: " + " ".join(str(error).split())[:200]
        raise UserError(f"{flag}{repo}: cannot reach the Hub at {constants.ENDPOINT} ({reason})") from None


def upload_plan(layout: SetLayout) -> list[tuple[Path, str]]:
    """(file on disk, path in the repo) for everything the push uploads."""
    if layout.folder:
        return folder_plan(layout.card.parent)
    return [(layout.card, CARD_NAME), (layout.data, layout.data.name)]


def push_set(layout: SetLayout, repo: str, private: bool = True) -> Pushed:
    """The set and its card, pushed (`push_files`)."""
    return push_files(upload_plan(layout), repo, private, f"agentdata: {layout.data.name} and its dataset card")


def folder_plan(folder: Path) -> list[tuple[Path, str]]:
    """Every file under `folder`, at its path relative to it; hidden ones (a staging file, the viewer's export
    marker) stay home."""
    files = [path for path in sorted(folder.rglob("*")) if path.is_file()]
    inside = [(path, path.relative_to(folder)) for path in files]
    return [(path, relative.as_posix()) for path, relative in inside if not relative.name.startswith(".")]


def push_files(plan: list[tuple[Path, str]], repo: str, private: bool, message: str) -> Pushed:
    """Create the dataset repo (private unless `private` is False; an existing one keeps its visibility) and
    upload `plan` (file on disk, path in the repo) in one commit."""
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi()
    api.create_repo(repo, repo_type=REPO_TYPE, private=private, exist_ok=True)
    operations = [CommitOperationAdd(path_in_repo=in_repo, path_or_fileobj=str(path)) for path, in_repo in plan]
    commit = api.create_commit(repo, operations, commit_message=message, repo_type=REPO_TYPE)
    return Pushed(repo, private, tuple(in_repo for _, in_repo in plan), str(getattr(commit, "commit_url", commit)))
