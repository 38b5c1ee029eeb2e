// cli/plot_command.hpp — `sheaf plot FILE.jsonl|FILE.csv [-o OUT.png|OUT.svg] [--x COL] [--y A,B]`
// (SPEC §8): the named numeric columns of a metrics log drawn against x (plot/render.hpp).
#pragma once

namespace sheaf {

int plot_main(int argc, char** argv);

}  // namespace sheaf
