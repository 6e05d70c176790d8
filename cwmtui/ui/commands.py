"""Command palette entries that take what the user types: ``ctrl+p 1234`` goes to step 1234."""

from __future__ import annotations

from textual.command import Hit, Hits, Provider


class StepCommands(Provider):
    """Type a step number (or "step 120", "-1" for the last) to jump to it."""

    async def search(self, query: str) -> Hits:
        text = query.strip().lower().removeprefix("step").removeprefix("go to").strip()
        if not text.lstrip("-").isdigit():
            return
        debugger = self.app.screen_stack[0]
        if self.screen is not debugger:  # (the triage list on top: no step of a screen out of sight)
            return
        branch = getattr(debugger, "branch", None)
        if branch is None or not len(branch):
            return
        step = int(text)
        if step < 0:
            step += len(branch)
        if not 0 <= step < len(branch):
            yield Hit(0.5, f"No step {text}: there are {len(branch)} (0 … {len(branch) - 1})", lambda: None)
            return

        def go() -> None:
            debugger.go_to_step(step)

        yield Hit(1.0, f"Go to step {step}", go, help=f"of {len(branch) - 1}")
