// libjpeg loaded at run time: see jpeg.hpp.
#include "slides/jpeg.hpp"

#include <mutex>
#include <string>

#ifdef TB_HAVE_JPEGLIB

#include <dlfcn.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>

extern "C" {
#include <jpeglib.h>
}

namespace tb::slides {

namespace {

// The libjpeg entry points the decoder uses, resolved with dlsym. Their types are the header's
// own declarations, so a mismatch cannot creep in.
struct Api {
  decltype(&::jpeg_std_error) std_error = nullptr;
  decltype(&::jpeg_CreateDecompress) create = nullptr;
  decltype(&::jpeg_destroy_decompress) destroy = nullptr;
  decltype(&::jpeg_mem_src) mem_src = nullptr;
  decltype(&::jpeg_read_header) read_header = nullptr;
  decltype(&::jpeg_start_decompress) start = nullptr;
  decltype(&::jpeg_read_scanlines) read_scanlines = nullptr;
  decltype(&::jpeg_finish_decompress) finish = nullptr;
  decltype(&::jpeg_abort_decompress) abort = nullptr;
};

std::mutex g_mutex;
const Api* g_api = nullptr;  // set once, under g_mutex; never freed (the library stays loaded)
std::string g_path;

// libjpeg's error handler must not return: it jumps back to the decoder with the message.
struct ErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

extern "C" void on_error(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Warnings and trace messages are dropped, as imagecodecs and OpenSlide drop them.
extern "C" void on_message(j_common_ptr) {}

template <class F>
bool resolve(void* handle, const char* name, F& slot, std::string* missing) {
  void* sym = dlsym(handle, name);
  if (sym == nullptr) {
    if (!missing->empty()) *missing += ", ";
    *missing += name;
    return false;
  }
  slot = reinterpret_cast<F>(sym);
  return true;
}

// Points cinfo's error handling at `err` (errors jump back to the caller's setjmp, warnings are
// dropped).
void attach_errors(const Api& api, jpeg_decompress_struct* cinfo, ErrorManager* err) {
  cinfo->err = api.std_error(&err->pub);
  err->pub.error_exit = on_error;
  err->pub.output_message = on_message;
  err->message[0] = '\0';
}

// Checks that `api` accepts this build's decompress struct (version and size); returns "" or
// libjpeg's refusal.
std::string check_abi(const Api& api) {
  jpeg_decompress_struct cinfo;
  ErrorManager err;
  attach_errors(api, &cinfo, &err);
  if (setjmp(err.jump)) {
    return std::string(err.message);
  }
  api.create(&cinfo, JPEG_LIB_VERSION, sizeof(cinfo));
  api.destroy(&cinfo);
  return "";
}

}  // namespace

int jpeg_abi_version() { return JPEG_LIB_VERSION; }

std::string jpeg_load(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_api != nullptr) return "";
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return std::string("cannot open it (") + (why ? why : "dlopen failed") + ")";
  }
  auto* api = new Api();
  std::string missing;
  resolve(handle, "jpeg_std_error", api->std_error, &missing);
  resolve(handle, "jpeg_CreateDecompress", api->create, &missing);
  resolve(handle, "jpeg_destroy_decompress", api->destroy, &missing);
  resolve(handle, "jpeg_mem_src", api->mem_src, &missing);
  resolve(handle, "jpeg_read_header", api->read_header, &missing);
  resolve(handle, "jpeg_start_decompress", api->start, &missing);
  resolve(handle, "jpeg_read_scanlines", api->read_scanlines, &missing);
  resolve(handle, "jpeg_finish_decompress", api->finish, &missing);
  resolve(handle, "jpeg_abort_decompress", api->abort, &missing);
  std::string why;
  if (!missing.empty()) {
    why = "it lacks " + missing;
  } else {
    why = check_abi(*api);
    if (!why.empty()) why = "it does not speak the libjpeg ABI " +
                            std::to_string(JPEG_LIB_VERSION) + " this build needs (" + why + ")";
  }
  if (!why.empty()) {
    delete api;
    dlclose(handle);
    return why;
  }
  g_api = api;
  g_path = path;
  return "";
}

std::string jpeg_loaded_path() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_path;
}

namespace {

const Api& api_or_throw() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_api == nullptr) throw jpeg_error("no libjpeg is loaded");
  return *g_api;
}

// The body of jpeg_decode_rgb between setjmp and the end of decoding: plain C state only, so a
// longjmp out of libjpeg skips no destructor. Returns false with err->message set on an error.
bool decode(const Api& api, jpeg_decompress_struct* cinfo, ErrorManager* err,
            const std::uint8_t* tables, std::size_t n_tables, const std::uint8_t* data,
            std::size_t n_data, JpegColor color, std::size_t max_pixels,
            std::vector<std::uint8_t>* pixels, int* width, int* height) {
  if (setjmp(err->jump)) {
    return false;
  }
  if (tables != nullptr && n_tables > 0) {
    api.mem_src(cinfo, const_cast<unsigned char*>(tables), static_cast<unsigned long>(n_tables));
    api.read_header(cinfo, FALSE);  // a tables-only stream: JPEG_HEADER_TABLES_ONLY
  }
  api.mem_src(cinfo, const_cast<unsigned char*>(data), static_cast<unsigned long>(n_data));
  api.read_header(cinfo, TRUE);
  if (static_cast<std::size_t>(cinfo->image_width) * cinfo->image_height > max_pixels) {
    std::snprintf(err->message, sizeof(err->message), "its header claims %ux%u pixels",
                  static_cast<unsigned>(cinfo->image_width),
                  static_cast<unsigned>(cinfo->image_height));
    return false;
  }
  if (cinfo->num_components != 3) {
    std::snprintf(err->message, sizeof(err->message),
                  "expected 3 colour components, got %d", cinfo->num_components);
    return false;
  }
  if (color == JpegColor::kRGB) cinfo->jpeg_color_space = JCS_RGB;
  cinfo->out_color_space = JCS_RGB;
  api.start(cinfo);
  const JDIMENSION w = cinfo->output_width;
  const JDIMENSION h = cinfo->output_height;
  if (cinfo->output_components != 3) {
    std::snprintf(err->message, sizeof(err->message), "decodes to %d components, not 3",
                  cinfo->output_components);
    return false;
  }
  // resize() may throw std::bad_alloc; it happens before any further libjpeg call, and the
  // caller's catch frees the decompressor.
  pixels->resize(static_cast<std::size_t>(w) * h * 3);
  const std::size_t stride = static_cast<std::size_t>(w) * 3;
  while (cinfo->output_scanline < h) {
    JSAMPROW row = pixels->data() + cinfo->output_scanline * stride;
    api.read_scanlines(cinfo, &row, 1);
  }
  api.finish(cinfo);
  *width = static_cast<int>(w);
  *height = static_cast<int>(h);
  return true;
}

}  // namespace

void jpeg_decode_rgb(const std::uint8_t* tables, std::size_t n_tables, const std::uint8_t* data,
                     std::size_t n_data, JpegColor color, std::size_t max_pixels,
                     std::vector<std::uint8_t>& pixels, int* width, int* height) {
  const Api& api = api_or_throw();
  if (data == nullptr || n_data == 0) throw jpeg_error("empty JPEG stream");
  jpeg_decompress_struct cinfo;
  ErrorManager err;
  attach_errors(api, &cinfo, &err);
  if (setjmp(err.jump)) {
    throw jpeg_error(err.message);  // jpeg_CreateDecompress refused (cannot happen after load)
  }
  api.create(&cinfo, JPEG_LIB_VERSION, sizeof(cinfo));
  bool ok = false;
  try {
    ok = decode(api, &cinfo, &err, tables, n_tables, data, n_data, color, max_pixels, &pixels,
                width, height);
  } catch (...) {
    api.destroy(&cinfo);
    throw;
  }
  api.destroy(&cinfo);
  if (!ok) throw jpeg_error(err.message);
}

}  // namespace tb::slides

#else  // built without jpeglib.h

namespace tb::slides {

int jpeg_abi_version() { return 0; }

std::string jpeg_load(const std::string&) {
  return "this build of tumorboard was compiled without jpeglib.h (install libjpeg-turbo's "
         "development files, e.g. Debian's libjpeg62-turbo-dev, and reinstall)";
}

std::string jpeg_loaded_path() { return ""; }

void jpeg_decode_rgb(const std::uint8_t*, std::size_t, const std::uint8_t*, std::size_t,
                     JpegColor, std::size_t, std::vector<std::uint8_t>&, int*, int*) {
  throw jpeg_error("this build of tumorboard was compiled without jpeglib.h");
}

}  // namespace tb::slides

#endif
