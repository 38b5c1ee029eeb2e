// plot/cairo_lib.hpp — cairo (the 2-D drawing library of `sheaf plot`), loaded with dlopen from
// libcairo.so.2 at the first plot, so the binary does not need cairo unless it draws. Only
// cairo's header is used at build time, for the functions' types.
#pragma once
#include <cairo-svg.h>
#include <cairo.h>

namespace sheaf {

#define SHEAF_CAIRO_FUNCTIONS(X)                                                                              \
  X(cairo_image_surface_create) X(cairo_svg_surface_create_for_stream) X(cairo_surface_write_to_png_stream)  \
  X(cairo_surface_finish) X(cairo_surface_destroy) X(cairo_surface_status) X(cairo_create) X(cairo_destroy)   \
  X(cairo_status) X(cairo_status_to_string) X(cairo_set_source_rgb) X(cairo_paint) X(cairo_set_line_width)     \
  X(cairo_set_line_join) X(cairo_move_to) X(cairo_line_to) X(cairo_stroke) X(cairo_rectangle) X(cairo_fill)    \
  X(cairo_arc) X(cairo_new_path) X(cairo_new_sub_path) X(cairo_clip) X(cairo_save) X(cairo_restore)            \
  X(cairo_select_font_face) X(cairo_set_font_size) X(cairo_show_text) X(cairo_text_extents)

struct Cairo {
#define SHEAF_CAIRO_MEMBER(name) decltype(&::name) name = nullptr;
  SHEAF_CAIRO_FUNCTIONS(SHEAF_CAIRO_MEMBER)
#undef SHEAF_CAIRO_MEMBER
};

// The loaded library; a SheafError saying how to install it when libcairo.so.2 is missing.
const Cairo& cairo();

}  // namespace sheaf
