"""Columnar tables: numpy arrays by column name, with categorical columns as codes + names."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Mapping, Optional, Sequence

from ._errors import usage_error

if TYPE_CHECKING:  # imported when a table is used: `import memsnap` stays small
    import numpy as np
    import pandas


class Table:
    """A table of equal-length columns.

    ``table["size"]`` is a numpy array (read-only where it is a view of the
    snapshot's own memory; such arrays keep the snapshot alive). A categorical
    column (``action``, ``source``, ``category``, ...) holds integer codes in
    ``table[name]`` and its labels in ``table.labels(name)``;
    ``table.decoded(name)`` gives one label per row. ``to_pandas()`` makes a
    DataFrame with those columns as pandas categoricals.
    """

    def __init__(
        self,
        columns: Mapping[str, Any],
        categories: Optional[Mapping[str, Sequence[str]]] = None,
    ) -> None:
        self._columns: Dict[str, Any] = dict(columns)
        self._categories: Dict[str, List[str]] = {
            name: list(labels) for name, labels in (categories or {}).items()
        }
        lengths = {len(column) for column in self._columns.values()}
        if len(lengths) > 1:
            raise usage_error(f"columns of different lengths: {sorted(lengths)}")

    @property
    def columns(self) -> List[str]:
        """Column names, in order."""
        return list(self._columns)

    def __getitem__(self, name: str) -> Any:
        return self._columns[name]

    def __contains__(self, name: object) -> bool:
        return name in self._columns

    def __iter__(self) -> Iterator[str]:
        return iter(self._columns)

    def __len__(self) -> int:
        return len(next(iter(self._columns.values()))) if self._columns else 0

    def labels(self, name: str) -> List[str]:
        """The labels of a categorical column (its codes index them)."""
        return list(self._categories[name])

    def is_categorical(self, name: str) -> bool:
        return name in self._categories

    def decoded(self, name: str) -> "np.ndarray":
        """A categorical column as one label per row (an object array)."""
        import numpy as np

        labels = np.array(self._categories[name], dtype=object)
        return labels[np.asarray(self._columns[name], dtype=np.int64)]

    def to_dict(self) -> Dict[str, Any]:
        """Columns by name, categorical ones decoded to labels."""
        return {
            name: (self.decoded(name) if name in self._categories else column)
            for name, column in self._columns.items()
        }

    def to_pandas(self) -> "pandas.DataFrame":
        """A pandas DataFrame (pandas is optional: ``pip install pandas``)."""
        import numpy as np

        try:
            import pandas as pd
        except ImportError as error:  # pragma: no cover - depends on the environment
            raise ImportError("to_pandas() needs pandas: pip install pandas") from error
        data: Dict[str, Any] = {}
        for name, column in self._columns.items():
            if name in self._categories:
                data[name] = pd.Categorical.from_codes(
                    np.asarray(column, dtype=np.int64), categories=self._categories[name]
                )
            else:
                data[name] = column
        return pd.DataFrame(data, copy=False)

    def __repr__(self) -> str:
        return f"<memsnap.Table: {len(self)} rows; columns {', '.join(self.columns)}>"
