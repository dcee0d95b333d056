from ..experiments.answer_position import answer_rows   # which positions: the experiment's own part
from .rows import mask_head_rows
