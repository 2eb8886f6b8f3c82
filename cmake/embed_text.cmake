# cmake -DIN=file -DOUT=header -P cmake/embed_text.cmake: writes a header that holds IN's text as
# the string kEmbeddedText (tests/gpu_graphs.cmake embeds the graph test's PTX with it).
file(READ ${IN} text)
file(WRITE ${OUT} "// Generated from ${IN} by cmake/embed_text.cmake; do not edit.\n"
  "#pragma once\nstatic const char kEmbeddedText[] = R\"zembed(${text})zembed\";\n")
