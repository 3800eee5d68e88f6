"""A recipes file: the data recipes to compare, each a params overlay, and the ladder every one is trained on.

    base: params.yaml              # the pipeline the overlays change (default: params.yaml)
    out_dir: data/recipes          # one folder per recipe, the shared validation text, the comparison
    validation: {fraction: 0.05, seed: 0}   # held-out pages, or {path: my_text.jsonl}
    ladder: {budgets: [...], shapes: [...]} # overlays the base's sweep: section (default: the sweep as it is)
    max_epochs: 40                 # a recipe whose data cannot supply the ladder within this many epochs is an error
    recipes:
      default: {}
      strict: {filter.steps.quality.threshold: 0.8}    # dotted keys, or nested mappings
      no_dedup: {dedup: false}                          # a stage set to false is skipped

A recipe changes only the data stages (extract, filter, dedup): the tokenizer, the validation text and the ladder
are shared, so the recipes differ in their data alone. Every overlay key must exist in the base (a filter step's
constructor arguments may be added); an unknown one is an error naming the nearest valid key.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.params import overlay, read_params

DATA_SECTIONS = ("extract", "filter", "dedup")
SKIPPABLE = ("dedup",)  # a stage a recipe may switch off with `<stage>: false`
DEFAULT_MAX_EPOCHS = 40.0  # Muennighoff et al. 2023: beyond ~40 epochs repeated tokens are worth ~nothing


class RecipeError(ValueError):
    """A recipes file that cannot be run (one line: the file, the recipe and the key)."""


@dataclass(frozen=True)
class Recipe:
    name: str
    changes: dict[str, Any]  # dotted key -> value, as written
    params: dict[str, Any]  # the base params with the changes applied (paths not yet redirected)
    skipped: tuple[str, ...] = ()

    def changes_stage(self, stage: str) -> bool:
        return any(k == stage or k.startswith(stage + ".") for k in self.changes)


@dataclass(frozen=True)
class RecipesSpec:
    path: Path
    base: Path
    out_dir: Path
    recipes: dict[str, Recipe]
    ladder: dict[str, Any] = field(default_factory=dict)
    validation: dict[str, Any] = field(default_factory=dict)
    max_epochs: float = DEFAULT_MAX_EPOCHS


def _unique_key_loader():
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        pass

    def mapping(loader, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in seen:
                raise RecipeError(f"line {key_node.start_mark.line + 1}: '{key}' is given twice")
            seen.add(key)
        return loader.construct_mapping(node, deep)

    UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    return UniqueKeyLoader


def read_yaml_unique(path: Path) -> dict[str, Any]:
    """A YAML mapping in which a key given twice (two recipes of one name) is an error, not the last one winning."""
    import yaml

    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_unique_key_loader()) or {}
    except RecipeError as exc:
        raise RecipeError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise RecipeError(f"{path}: invalid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise RecipeError(f"{path}: expected a mapping with recipes:, got {type(data).__name__}")
    return data


def dotted(changes: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings as dotted keys ({"filter": {"steps": {"c4": True}}} -> {"filter.steps.c4": True}); a
    stage set to false stays one key."""
    out = {}
    for key, value in changes.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out |= dotted(value, name + ".")
        else:
            out[name] = value
    return out


def _known_keys(params: dict[str, Any], prefix: str = "") -> list[str]:
    keys = []
    for key, value in params.items():
        keys.append(f"{prefix}{key}")
        if isinstance(value, dict):
            keys += _known_keys(value, f"{prefix}{key}.")
    return keys


def _check_key(key: str, base: dict[str, Any], where: str) -> None:
    parts = key.split(".")
    if parts[0] not in DATA_SECTIONS:
        raise RecipeError(f"{where}: '{key}' is not a data setting: a recipe changes {', '.join(DATA_SECTIONS)} "
                          f"(the tokenizer, validation text and ladder are shared; the ladder is set under ladder:)")
    node: Any = base
    for depth, part in enumerate(parts):
        if isinstance(node, dict) and part in node:
            node = node[part]
            continue
        step_argument = depth == 3 and parts[:2] == ["filter", "steps"] and isinstance(node, (dict, bool))
        if step_argument:
            return  # a filter step's constructor argument (the step's own class checks it when the filter builds)
        known = _known_keys({parts[0]: base.get(parts[0], {})})
        near = difflib.get_close_matches(key, known, n=1, cutoff=0.5)
        hint = f" (nearest: {near[0]})" if near else ""
        raise RecipeError(f"{where}: unknown key '{key}'{hint}")


def _apply(base: dict[str, Any], changes: dict[str, Any], where: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    params, skipped = base, []
    for key, value in changes.items():
        if key in SKIPPABLE and value is False:
            skipped.append(key)
            continue
        _check_key(key, base, where)
        nested: Any = value
        for part in reversed(key.split(".")):
            nested = {part: nested}
        if key.startswith("filter.steps.") and key.count(".") == 3:  # a step's argument: true/false becomes {}
            step = key.split(".")[2]
            if not isinstance(params["filter"]["steps"].get(step), dict):
                params = _replace_step(params, step)
        params = overlay(params, nested)
    return params, tuple(skipped)


def _replace_step(params: dict[str, Any], step: str) -> dict[str, Any]:
    """A filter step given as true/false becomes a mapping of its arguments (true: the paper's defaults)."""
    steps = dict(params["filter"]["steps"])
    steps[step] = {}
    return {**params, "filter": {**params["filter"], "steps": steps}}


def load_spec(path: str | Path) -> RecipesSpec:
    """The recipes file, checked: every recipe's overlay applies to the base (``RecipeError`` otherwise)."""
    path = Path(path)
    if not path.is_file():
        raise RecipeError(f"{path}: no such recipes file")
    data = read_yaml_unique(path)
    unknown = set(data) - {"base", "out_dir", "validation", "ladder", "max_epochs", "recipes"}
    if unknown:
        raise RecipeError(f"{path}: unknown key(s) {', '.join(sorted(unknown))} (known: base, out_dir, validation, "
                          f"ladder, max_epochs, recipes)")
    base = Path(data.get("base", "params.yaml"))
    if not base.is_file():
        raise RecipeError(f"{path}: base: {base} does not exist")
    params = read_params(base)
    recipes_in = data.get("recipes") or {}
    if not isinstance(recipes_in, dict) or len(recipes_in) < 2:
        raise RecipeError(f"{path}: recipes: needs two or more named recipes, got {len(recipes_in or {})}")
    recipes = {}
    for name, changes in recipes_in.items():
        name = str(name)
        if not name.replace("_", "").replace("-", "").isalnum():
            raise RecipeError(f"{path}: recipe '{name}': a name of letters, digits, - and _ (it names a folder)")
        flat = dotted(changes or {})
        merged, skipped = _apply(params, flat, f"{path}: recipe '{name}'")
        recipes[name] = Recipe(name, flat, merged, skipped)
    ladder = data.get("ladder") or {}
    unknown_ladder = set(ladder) - set(params.get("sweep", {})) - {"budgets", "shapes", "seeds"}
    if unknown_ladder:
        near = difflib.get_close_matches(sorted(unknown_ladder)[0], list(params.get("sweep", {})), n=1)
        raise RecipeError(f"{path}: ladder: unknown key '{sorted(unknown_ladder)[0]}'"
                          + (f" (nearest: {near[0]})" if near else "") + " (the sweep: section's keys)")
    validation = data.get("validation") or {}
    if set(validation) - {"fraction", "seed", "path"}:
        raise RecipeError(f"{path}: validation: takes fraction and seed (held-out pages) or path (your own text)")
    max_epochs = float(data.get("max_epochs", DEFAULT_MAX_EPOCHS))
    return RecipesSpec(path, base, Path(data.get("out_dir", "data/recipes")), recipes, dict(ladder),
                       dict(validation), max_epochs)
