// Advances a ring buffer's counter (a scalar) modulo the ring's depth, on the counter's tile.
void advanceRing(poplar::Graph &g, const poplar::Tensor &counter, unsigned depth, const std::string &vertex,
                 poplar::program::Sequence &prog) {
  const auto mapping = g.getTileMapping(counter);
  unsigned tile = 0;
  while (tile + 1 < mapping.size() && mapping[tile].empty()) ++tile;
  poplar::Tensor d = g.addConstant<unsigned>(poplar::UNSIGNED_INT, {}, depth, "ring depth");
  g.setTileMapping(d, tile);
  poplar::ComputeSet cs = g.addComputeSet("ring advance");
  poplar::VertexRef v = g.addVertex(cs, vertex, {{"index", counter}, {"depth", d}});
  g.setTileMapping(v, tile);
  prog.add(poplar::program::Execute(cs));
}
