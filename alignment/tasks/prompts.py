"""The prompt templates of the alignment tasks: ``R1_ZERO_PROMPT`` is CS336 assignment 5's ``r1_zero.prompt`` (after
DeepSeek-R1-Zero, Guo et al., 2025); ``SHORT_PROMPT`` keeps its answer format for tiny models with short contexts.
"""

R1_ZERO_PROMPT = (
    "A conversation between User and Assistant. The User asks a question, and the Assistant solves it. The Assistant "
    "first thinks about the reasoning process in the mind and then provides the User with the answer. The reasoning "
    "process is enclosed within <think> </think> and answer is enclosed within <answer> </answer> tags, respectively, "
    "i.e., <think> reasoning process here </think> <answer> answer here </answer>.\n"
    "User: {question}\n"
    "Assistant: <think>"
)
SHORT_PROMPT = "User: {question}\nAssistant: <think>"  # same answer format, for tiny models with short contexts
PROMPTS = {"r1_zero": R1_ZERO_PROMPT, "short": SHORT_PROMPT}


def format_prompt(question: str, template: str = R1_ZERO_PROMPT) -> str:
    """``template`` (a string with ``{question}``, or a key of ``PROMPTS``) filled with the question."""
    return PROMPTS.get(template, template).replace("{question}", question)


def check_template(template: str, name: str) -> None:
    """A ValueError naming the setting ``name`` unless ``template`` is a key of ``PROMPTS`` or contains
    ``{question}``."""
    if template not in PROMPTS and "{question}" not in template:
        raise ValueError(f"{name} must be 'short', 'r1_zero' or contain {{question}}, got {template!r}")
