/*
** ember_plugin.h -- what every ember plugin exports, and the loader's view.
**
** A plugin is a shared object that exports two symbols:
**
**   const em_plugin_info ember_plugin_info;            (data)
**   const void *ember_plugin_init(char *err, size_t errlen);  (code)
**
** The loader first checks the file's bytes (an ELF shared object for this
** machine whose program headers and loadable segments lie inside the file:
** a truncated copy would crash inside dlopen), then dlopen()s it, reads `ember_plugin_info` -- plain data,
** so no plugin code runs -- and checks its abi_version against the ABI of
** its kind. Only then does it call ember_plugin_init, which returns the
** kind's vtable (em_backend * or em_attention_variant *) or NULL with a
** message in err. A plugin may export `void ember_plugin_fini(void)`.
**
** Search order: an explicit path (em_plugin_load), then each folder in
** EMBER_PLUGIN_PATH (colon-separated), then libember's own folder: for an
** installed libember the install folder beside it (lib/ember/plugins, where
** the tree was installed or moved), for one running from a build tree that
** tree's build/plugins -- so an installed ember and a build never pick up
** each other's plugins. The first plugin of a given kind and name wins;
** later ones are listed as rejected ("shadowed by ..."). Every file that
** fails is listed with its reason, and the process goes on.
** EMBER_PLUGIN_PATH_ONLY=1 skips the install and build folders (tests).
*/
#ifndef EMBER_PLUGIN_H
#define EMBER_PLUGIN_H

#include "ember.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum em_plugin_kind {
  EM_PLUGIN_BACKEND = 1,   /* vtable: em_backend (ember_backend.h) */
  EM_PLUGIN_ATTENTION = 2  /* vtable: em_attention_variant (ember_attention.h) */
} em_plugin_kind;

typedef struct em_plugin_info {
  uint32_t abi_version;    /* EM_BACKEND_ABI_VERSION or EM_ATTENTION_ABI_VERSION */
  uint32_t kind;           /* em_plugin_kind */
  const char *name;        /* "cpu", "cuda", "standard", "linear", ... */
  const char *version;     /* the plugin's own version, free text */
  const char *description; /* one line */
} em_plugin_info;

typedef const void *(*em_plugin_init_fn)(char *err, size_t errlen);
typedef void (*em_plugin_fini_fn)(void);

#define EM_PLUGIN_INFO_SYMBOL "ember_plugin_info"
#define EM_PLUGIN_INIT_SYMBOL "ember_plugin_init"
#define EM_PLUGIN_FINI_SYMBOL "ember_plugin_fini"

/* Helps a plugin define its exports with the right linkage. */
#define EM_PLUGIN_EXPORT EM_API

/* One file the loader looked at. */
typedef struct em_plugin_record {
  char path[1024];
  char name[64];           /* from the info, or the file name if unreadable */
  int kind;                /* em_plugin_kind, 0 if unknown */
  bool loaded;
  char reason[512];        /* why it was rejected ("" if loaded) */
  char version[64];
  char description[160];
  const void *vtable;      /* when loaded */
} em_plugin_record;

/* Loads one plugin file explicitly (searched first). The record says
** what happened; the status is EM_ERR_PLUGIN with a message on failure. */
EM_API em_status em_plugin_load(const char *path, const em_plugin_record **rec);
/* Registers a plugin that was not loaded from a shared object (an
** attention variant written in Lua): vtable (which must outlive the
** process's use of it) under name, replacing an earlier one of that kind
** and name that was registered this way. With reason set, records a
** rejected candidate at path instead (vtable unused). */
EM_API em_status em_plugin_register(int kind, const char *path, const char *name, const char *version,
                                    const char *description, const void *vtable, const char *reason);
/* Rescans the search path for new files (drop-in plugins). */
EM_API void em_plugin_rescan(void);
EM_API int em_plugin_count(void);
EM_API const em_plugin_record *em_plugin_get(int i);
/* The loaded plugin of that kind and name, or NULL. */
EM_API const em_plugin_record *em_plugin_find(int kind, const char *name);
/* Calls fn with the name of each file in folder dir whose name ends in
** suffix (".so", ".lua"; hidden files are skipped), in byte order of the names: how the loader
** scans a folder, for the Lua side's variant files too (no shell, so any
** folder name works). EM_ERR_IO when the folder cannot be opened. */
EM_API em_status em_plugin_list_dir(const char *dir, const char *suffix,
                                    void (*fn)(const char *name, void *ud), void *ud);
/* The folders searched, in order, joined by ':' into buf. */
EM_API const char *em_plugin_search_path(char *buf, size_t n);
/* A paragraph for error messages: where we looked and why each candidate
** of that kind was rejected. */
EM_API const char *em_plugin_report(int kind, const char *name, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
