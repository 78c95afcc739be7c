"""Operations on a store: diagnosis (``dagq doctor``), dead letters and retention."""
