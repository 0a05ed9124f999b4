"""Reasoning with Trees (RwT, Shen et al.): MCTS with PUCT over KG relations and hop-level
beam search, with the LLM as the policy model and Eq. 4's value function.

Implemented: the policy (three guessed answers, relation priors from the Figure 7/8
prompts), PUCT selection / expansion / evaluation / backpropagation, hop-level beam
search, the critical model (similarity of reached entities to the guesses, any
:class:`~.value.Embedder`) and a roll-out model interface. Not yet: training the roll-out
model from search trees (Eq. 6-7); until then the policy LLM rates states
(:class:`~.value.LLMRollout`).
"""

from .beam import HopBeamSearch
from .engine import RwTConfig, RwTSearch
from .mcts import MonteCarloTreeSearch
from .value import CriticalModel, Embedder, LexicalEmbedder, LLMRollout, RolloutModel

__all__ = [
    "CriticalModel", "Embedder", "HopBeamSearch", "LLMRollout", "LexicalEmbedder", "MonteCarloTreeSearch",
    "RolloutModel", "RwTConfig", "RwTSearch",
]
