"""Reasoning with Trees (RwT, Shen et al.): MCTS with PUCT over KG relations and hop-level
beam search, with the LLM as the policy model and Eq. 4's value function.

Implemented: the policy (three guessed answers, relation priors from the Figure 7/8
prompts), PUCT selection / expansion / evaluation / backpropagation, hop-level beam
search, the critical model (similarity of reached entities to the guesses, any
:class:`~.value.Embedder`), and the roll-out model: trained from search trees (Eq. 6-7;
:mod:`.train`, :class:`~.valuemodel.TrainedRollout`) or, without a trained one, the
policy LLM rating states (:class:`~.value.LLMRollout`).
"""

from .beam import HopBeamSearch
from .engine import RwTConfig, RwTSearch
from .mcts import MonteCarloTreeSearch
from ...embed import Embedder, LexicalEmbedder
from .value import CriticalModel, LLMRollout, RolloutModel
from .valuemodel import TrainedRollout, ValueModel

__all__ = [
    "CriticalModel", "Embedder", "HopBeamSearch", "LLMRollout", "LexicalEmbedder", "MonteCarloTreeSearch",
    "RolloutModel", "RwTConfig", "RwTSearch", "TrainedRollout", "ValueModel",
]
