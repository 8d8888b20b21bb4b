"""ProMP and its meta-policy-gradient family as garage algorithms."""
from garage_promp.algos.base import MetaPolicySearch
from garage_promp.algos.meta_objective import MetaObjective
from garage_promp.algos.promp import ProMP
from garage_promp.algos.trpo_maml import TRPOMAML
from garage_promp.algos.vpg import EMAMLVPG, LVCVPG, MAMLVPG, DiCEVPG, MetaVPG

__all__ = [
    'DiCEVPG', 'EMAMLVPG', 'LVCVPG', 'MAMLVPG', 'MetaObjective',
    'MetaPolicySearch', 'MetaVPG', 'ProMP', 'TRPOMAML'
]
