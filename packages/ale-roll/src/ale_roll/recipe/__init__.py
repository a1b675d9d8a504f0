"""ROME's recipe from one config (`ale-roll recipe -c recipe.yaml`): CPT → SFT stage 1 (broad) →
SFT stage 2 (high quality, error × task masks) → IPA RL → evaluation, resumable at any stage."""

from ale_roll.recipe.config import RecipeConfig, load_recipe_config
from ale_roll.recipe.run import STAGES, Recipe, format_table, run_recipe

__all__ = ["STAGES", "Recipe", "RecipeConfig", "format_table", "load_recipe_config", "run_recipe"]
