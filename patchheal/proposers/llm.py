"""The `llm` proposer: one chat-completions call per attempt, its edits applied in the worktree.

The model is shown the rendered retry context and asked for a strategy tag,
a one-line rationale and the patch as SEARCH/REPLACE blocks (preferred) or a
unified diff. Both are applied here (see editformats.py), tolerantly, and the
candidate is the worktree's own `git diff`, so the loop always receives a
canonical diff of what the model meant.

A reply with no usable edit (no block, an unterminated block, a SEARCH that
matches nothing or several places, a path outside the worktree) is not an
error: `propose` returns a Candidate with `diff=""` and a rationale that says
why, and the loop records it as `apply_failed` like any patch that does not
apply, so the next attempt's avoid-list shows it. Errors from the provider
are raised: `TransientProposerError` after the retries are spent (timeouts,
connection errors, 429, 5xx), `ProposerError` at once for 400/401/403 or a
malformed chat-completions envelope.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from patchheal.config import JobSpec
from patchheal.errors import BadInput, PatchApplyError, TokenBudgetReached
from patchheal.evidence.build import render_context
from patchheal.evidence.tokens import count_tokens
from patchheal.models import Candidate
from patchheal.proposers.base import ProposalRequest
from patchheal.proposers.chat import ChatClient, ChatReply
from patchheal.proposers.config import LLMConfig
from patchheal.proposers.editformats import apply_reply, parse_reply
from patchheal.scrub.scrubber import Scrubber
from patchheal.workspace.worktrees import worktree_diff

SYSTEM_PROMPT = """\
You fix failing CI steps. You are shown the failure, code around it, the
constraints and the attempts that already failed. Reply in exactly this form:

STRATEGY: <one tag, snake_case: add_guard, fix_import, fix_logic, fix_type,
fix_config, handle_none, fix_off_by_one, update_call, or another short tag>
RATIONALE: <one line: the cause and how the patch fixes it>

Then the patch as one or more SEARCH/REPLACE blocks, each preceded by the
file's path relative to the repository root on a line of its own:

path/to/file.py
<<<<<<< SEARCH
exact lines copied from the current file, enough to be unique
=======
the lines that replace them
>>>>>>> REPLACE

An empty SEARCH section creates a new file. If you cannot use SEARCH/REPLACE
blocks, give a unified diff (--- a/path, +++ b/path, @@ hunks) instead.
Change only what the fix needs; do not repeat a failed attempt's approach."""

# A reply cap below this cannot carry a patch: the call is not worth its tokens.
MIN_REPLY_TOKENS = 64
_REMINDER = "\nReply with STRATEGY, RATIONALE and SEARCH/REPLACE blocks as instructed."


class LLMProposer:
    """Asks an OpenAI-compatible endpoint for a patch, once per `propose` call."""

    def __init__(
        self, config: LLMConfig, *, job: JobSpec, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        api_key = None
        if config.api_key_env:
            api_key = os.environ.get(config.api_key_env)
            if not api_key:
                # The spec names a key the environment does not have: bad input (exit 2).
                raise BadInput(
                    f"llm proposer ({config.base_url}, model {config.model}): "
                    f"environment variable {config.api_key_env} is not set"
                )
        self.config = config
        self.name = f"llm:{config.model}"
        self._job = job
        self._scrubber = Scrubber.from_env((*job.job.env, config.api_key_env or ""))
        self._client = ChatClient(
            base_url=config.base_url,
            model=config.model,
            api_key=api_key,
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            timeout=config.timeout_seconds,
            attempts=config.retry_attempts,
            sleep=sleep,
        )
        self.calls = 0
        self.tokens_used = 0
        self.last_prompt = ""
        self.last_reply = ""

    def propose(self, request: ProposalRequest) -> Candidate:
        context = render_context(request.context, max_tokens=self.config.context_tokens)
        # The context is scrubbed already; this pass also masks this job's own secret values.
        user = self._scrubber.scrub(context) + _REMINDER
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": user},
        ]
        self.last_prompt = user
        reply_cap = self._reply_cap(request, SYSTEM_PROMPT + user)
        self.calls += 1
        reply = self._client.complete(messages, max_tokens=reply_cap)
        tokens = _usage(reply, SYSTEM_PROMPT + user)
        self.tokens_used += tokens
        self.last_reply = self._scrubber.scrub(reply.content)
        return self._candidate(request, reply.content, tokens)

    def _reply_cap(self, request: ProposalRequest, prompt: str) -> int:
        """The reply's cap for this call: the configured one, lowered so that prompt plus
        reply fit what the job's token budget has left. The budget is reserved before the
        call, never found overshot after it."""
        cap = self.config.max_tokens
        if request.token_allowance is None:
            return cap
        prompt_tokens = count_tokens(prompt)
        left = request.token_allowance - prompt_tokens
        if left < MIN_REPLY_TOKENS:
            raise TokenBudgetReached(
                f"model token budget: {request.token_allowance} token(s) left, the next "
                f"prompt alone is {prompt_tokens}; no call made"
            )
        return min(cap, left)

    def _candidate(self, request: ProposalRequest, content: str, tokens: int) -> Candidate:
        parsed = parse_reply(content)
        strategy = parsed.strategy or "unspecified"
        rationale = self._scrubber.scrub(parsed.rationale or "")

        def unusable(why: str) -> Candidate:
            return Candidate(
                diff="",
                strategy=strategy,
                rationale=f"no usable edit: {why}"
                + (f" (model said: {rationale})" if rationale else ""),
                proposer=self.name,
                label=f"attempt-{request.attempt_number}",
                tokens_used=tokens,
            )

        if parsed.problems:
            # e.g. a reply cut off by max_tokens: half a patch is not the patch the model meant.
            return unusable("; ".join(parsed.problems))
        if parsed.empty:
            return unusable("no SEARCH/REPLACE block or unified diff in the reply")
        try:
            apply_reply(request.worktree, parsed)
        except PatchApplyError as exc:
            return unusable(self._scrubber.scrub(str(exc)))
        diff = worktree_diff(request.worktree)
        if not diff.strip():
            return unusable("the edits change nothing")
        return Candidate(
            diff=diff,
            strategy=strategy,
            rationale=rationale,
            proposer=self.name,
            label=f"attempt-{request.attempt_number}",
            tokens_used=tokens,
        )


def _usage(reply: ChatReply, prompt: str) -> int:
    """Tokens the provider reported, else counted here (prompt + reply)."""
    if reply.total_tokens is not None:
        return reply.total_tokens
    if reply.prompt_tokens is not None and reply.completion_tokens is not None:
        return reply.prompt_tokens + reply.completion_tokens
    return count_tokens(prompt) + count_tokens(reply.content)
