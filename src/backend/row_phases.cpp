// backend/row_phases.cpp — marks the row phases of a GPU schedule (fusion.hpp, "Row phases"):
// consecutive loops over one space that a GPU backend may run as the phases of one kernel of a
// block per row — those whose reductions fold the same innermost dims (the rows), loops over a
// value per row, and sums over the rows (column sums) — when each reads what the run wrote only at
// its own point or row. It moves a loop a few steps up into a run it continues, and a column sum
// just before a run's first loop after it, when nothing in between is read.
#include <algorithm>

#include "backend/fusion.hpp"

namespace sheaf::fusion {

using ir::Op;

namespace {

class RowPhases {
 public:
  RowPhases(const ir::Graph& g, Schedule& s) : g_(g), s_(s) {}

  // Step::row_phase (fusion.hpp): step k continues the run that starts at step `first` (a loop
  // over the run's space) when it is a loop over that space whose reductions fold the run's rows
  // (its innermost dims), or — once the run has rows — a loop without reductions over the rows
  // themselves (a value per row: the mean from a sum) or a loop over the space whose reductions
  // fold every dim but the rows (a column sum: a bias or layer-norm scale gradient), and it reads
  // what the run wrote only at its own point or row (never a column sum). A step that would
  // continue a run with rows but comes a few steps after its end moves up to it when it reads
  // nothing those steps write (the gradient of a cross-entropy's logits, computed after the loss's
  // sum over the batch though it needs only the per-row values); a column sum just before a run's
  // first step moves after it when that step does not read it.
  void run() {
    std::vector<int64_t> rows;  // the dims the run's first reduction folds; empty until one does
    for (size_t k = 0, first = 0; k < s_.steps.size(); ++k) {
      s_.steps[k].row_phase = k > first && continues_run(k, first, k, rows);
      if (!s_.steps[k].row_phase && !rows.empty())
        for (size_t j = k + 1; j < std::min(s_.steps.size(), k + kRunLookahead); ++j)
          if (reads_none_of(j, k) && continues_run(j, first, k, rows)) {
            move_step(j, k);
            s_.steps[k].row_phase = true;
            break;
          }
      if (!s_.steps[k].row_phase && k > 0 && first == k - 1 && precedes_as_column(k - 1, k) && reads_none_of(k, k - 1)) {
        move_step(k, k - 1);  // the run starts at k - 1 (its rows: below); the column sum continues it
        first = k - 1, rows = s_.steps[first].reduce_dims;
        s_.steps[k].row_phase = continues_run(k, first, k, rows);
      }
      if (!s_.steps[k].row_phase) first = k, rows.clear();
      if (rows.empty() && s_.steps[k].reduces) rows = s_.steps[k].reduce_dims;
    }
  }
  static constexpr size_t kRunLookahead = 8;

  // Whether loop `column`, just before loop `first`, sums columns of the rows that `first` starts
  // a run over (first's reductions fold its innermost dims; column's fold all the others).
  bool precedes_as_column(size_t column, size_t first) const {
    const Step &c = s_.steps[column], &f = s_.steps[first];
    return c.kind == StepKind::Loop && f.kind == StepKind::Loop && f.reduces && innermost(f.reduce_dims, f.space.size()) &&
           c.space == f.space && sums_columns(c, f.reduce_dims);
  }

  // Whether loop `st` reduces over exactly the dims of its space before `rows` (its kept dims are the rows).
  static bool sums_columns(const Step& st, const std::vector<int64_t>& rows) {
    if (!st.reduces || rows.empty() || st.reduce_dims.size() + rows.size() != st.space.size()) return false;
    for (size_t d = 0; d < st.reduce_dims.size(); ++d)
      if (st.reduce_dims[d] != static_cast<int64_t>(d)) return false;
    return true;
  }

  // Whether step `self`, placed at step k (self ≥ k), continues the run of steps first..k-1 whose
  // reductions fold `rows` (empty: none has reduced yet).
  bool continues_run(size_t self, size_t first, size_t k, const std::vector<int64_t>& rows) const {
    const Step& st = s_.steps[self];
    const Shape& space = s_.steps[first].space;
    const bool rows_inner = rows.empty() || innermost(rows, space.size());
    const Shape per_row(space.begin(), space.end() - static_cast<std::ptrdiff_t>(rows_inner ? rows.size() : 0));
    const bool over_space = st.space == space && rows_inner &&
                            (!st.reduces || (innermost(st.reduce_dims, space.size()) && (rows.empty() || st.reduce_dims == rows)) ||
                             sums_columns(st, rows));
    const bool over_rows = !rows.empty() && rows_inner && !st.reduces && squeezed(st.space) == squeezed(per_row);
    return st.kind == StepKind::Loop && s_.steps[first].kind == StepKind::Loop && (over_space || over_rows) &&
           reads_rows(static_cast<int32_t>(self), static_cast<int32_t>(first), static_cast<int32_t>(k), space, per_row);
  }

  // Whether step j reads nothing that steps k..j-1 write (directly or through a copied view).
  bool reads_none_of(size_t j, size_t k) const {
    const auto from = static_cast<int32_t>(k), self = static_cast<int32_t>(j);
    auto written_between = [&](int32_t v) { return s_.step_of[v] >= from && s_.step_of[v] < self; };
    for (int32_t ni : s_.steps[j].nodes)
      for (int32_t u : g_.nodes[static_cast<size_t>(ni)].in) {
        if (computes(s_, u, self)) continue;
        if (written_between(u) || (s_.view[u] && written_between(read_view(s_, u, self).buffer))) return false;
      }
    return true;
  }

  // Step j moves to position k < j (steps k..j-1 move one later); step numbers follow.
  void move_step(size_t j, size_t k) {
    std::rotate(s_.steps.begin() + static_cast<std::ptrdiff_t>(k), s_.steps.begin() + static_cast<std::ptrdiff_t>(j),
                s_.steps.begin() + static_cast<std::ptrdiff_t>(j) + 1);
    for (int32_t& st : s_.step_of)
      if (st == static_cast<int32_t>(j)) st = static_cast<int32_t>(k);
      else if (st >= static_cast<int32_t>(k) && st < static_cast<int32_t>(j)) ++st;
  }

  // Whether `dims` are the last dims of a space of rank `rank`.
  static bool innermost(const std::vector<int64_t>& dims, size_t rank) {
    for (size_t j = 0; j < dims.size(); ++j)
      if (dims[j] != static_cast<int64_t>(rank - dims.size() + j)) return false;
    return !dims.empty();
  }

  // Whether loop `self`, placed at step k (over the run's `space`, or over its rows), reads the
  // buffers of steps first..k-1 only at its own point: a value per point of `space` at that point,
  // a value per row (a buffer over `per_row`, the dims of `space` before the rows) at its row.
  bool reads_rows(int32_t self, int32_t first, int32_t k, const Shape& space, const Shape& per_row) const {
    const Step& st = s_.steps[static_cast<size_t>(self)];
    const bool over_space = st.space == space;
    for (int32_t ni : st.nodes) {
      const ir::Node& n = g_.nodes[static_cast<size_t>(ni)];
      for (int32_t u : n.in) {
        if (computes(s_, u, self) || !s_.view[u]) continue;
        const View& w = read_view(s_, u, k);
        const int32_t by = s_.step_of[w.buffer];
        if (by < first || by >= k) continue;
        const Step& writer = s_.steps[static_cast<size_t>(by)];
        if (writer.reduces && !innermost(writer.reduce_dims, writer.space.size()) && g_.producer(w.buffer).op == Op::Reduce)
          return false;  // a column sum: complete only after the run
        const bool elementwise_read = ir::is_elementwise(n.op) || n.op == Op::Reduce;
        if (!elementwise_read || shape(u) != st.space || w.offset != 0) return false;
        const bool row_value = shape(w.buffer) != space;  // else a value per point
        if (row_value && shape_numel(shape(w.buffer)) != shape_numel(per_row)) return false;
        if (!over_space && !row_value) return false;
        // where the writer put the element of point p: a value per row is contiguous over per_row,
        // the dims of `space` before the rows
        std::vector<int64_t> written = contiguous_strides(row_value && over_space ? per_row : st.space);
        written.resize(st.space.size(), 0);
        for (size_t d = 0; d < st.space.size(); ++d)
          if (st.space[d] != 1 && w.strides[d] != written[d]) return false;
      }
    }
    return true;
  }

  static Shape squeezed(const Shape& s) {
    Shape r;
    for (int64_t n : s)
      if (n != 1) r.push_back(n);
    return r;
  }


 private:
  const ir::Graph& g_;
  Schedule& s_;

  const Shape& shape(int32_t v) const { return g_.type(v).shape; }
};

}  // namespace

void mark_row_phases(const ir::Graph& g, Schedule& s) { RowPhases(g, s).run(); }

}  // namespace sheaf::fusion
