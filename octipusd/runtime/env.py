"""The environment a vendor CLI runs with (seed 003 "Authentication and fallback").

By default the child uses the vendor CLI's own stored login and configuration: Octipus does
not hand it the backend's API-key variables from the daemon's environment. A model row that
sets ``metadata.cliAgent.inheritApiKeys: true`` keeps them. Claude's OAuth token variable
(``CLAUDE_CODE_OAUTH_TOKEN``) is not an API key and always passes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Backend API-key variables removed unless ``inheritApiKeys`` is true.
API_KEY_VARIABLES = frozenset(
    {
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "OPENAI_API_KEY",
        "CODEX_API_KEY",
        "MISTRAL_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "ZAI_API_KEY",
        "ZHIPUAI_API_KEY",
        "MOONSHOT_API_KEY",
        "KIMI_API_KEY",
    }
)


def vendor_env(base: Mapping[str, str], options: Mapping[str, Any]) -> dict[str, str]:
    """Return the child environment for a run.

    Args:
        base: The daemon's environment for vendors (PATH already set to the search PATH).
        options: The row's ``metadata.cliAgent`` merged with the session's options.

    Returns:
        ``base`` without :data:`API_KEY_VARIABLES`, unless ``options["inheritApiKeys"]`` is True;
        the variable a GLM/Kimi row names in ``options["authTokenEnv"]`` is always kept. The
        row's own ``options["env"]`` (name -> value, checked when the row was saved) is set last:
        the operator put it on the model on purpose (seed 003 "In shared spaces": a user-level
        ``env`` does not apply in a space; "set its environment on the model").
    """
    extra = options.get("env")
    own = {str(k): str(v) for k, v in extra.items()} if isinstance(extra, dict) else {}
    if options.get("inheritApiKeys") is True:
        return {**base, **own}
    keep = options.get("authTokenEnv")  # GLM/Kimi rows name the variable holding their key
    return {**{k: v for k, v in base.items() if k not in API_KEY_VARIABLES or k == keep}, **own}
