/* The lean path's stepping loop in C: see garage_promp/envs/_cstep.py.
 *
 * gp_step_batch steps n simulations, each as MujocoMetaEnv._simulate does from
 * Python (gymnasium's MujocoEnv.do_simulation without the shape check):
 *
 *     x_before[i] = d[i]->qpos[0]                       (if x_before)
 *     d[i]->ctrl  = ctrl row i
 *     mj_step(m[i], d[i]), nstep times                  (as mujoco.mj_step(..., nstep))
 *     mj_rnePostConstraint(m[i], d[i])                  (if rne)
 *     qpos row i = d[i]->qpos, qvel row i = d[i]->qvel  (if qpos / qvel)
 *
 * with the same MuJoCo library the Python bindings call, so every number is the
 * same bit for bit. A MuJoCo error (mju_error) inside the loop does not unwind
 * through these frames: while the loop runs, this thread's MuJoCo error handler
 * (the thread-local one, which mju_error calls before the global mju_user_error,
 * and which the Python bindings set around their own calls) jumps back here; the
 * previous handler is restored on every path, and the function returns the
 * failing simulation's index plus one, with MuJoCo's message in gp_last_error();
 * the caller raises it as the bindings do (mujoco.FatalError). Returns 0 when
 * every simulation was stepped. The thread-local handler's accessors are exported
 * by libmujoco but not declared in its public headers: they are declared here, and
 * a MuJoCo without them fails to link, so the loop is not built (the caller then
 * steps from Python).
 */
#include <setjmp.h>
#include <string.h>

#include <mujoco/mujoco.h>
#include <mujoco/mjxmacro.h>

typedef void (*gp_error_fn)(const char*);
extern gp_error_fn _mjPRIVATE__get_tls_error_fn(void);
extern void _mjPRIVATE__set_tls_error_fn(gp_error_fn);

static __thread jmp_buf gp_jump;
static __thread char gp_message[1024];

static void gp_on_error(const char* message) {
  strncpy(gp_message, message, sizeof(gp_message) - 1);
  gp_message[sizeof(gp_message) - 1] = '\0';
  longjmp(gp_jump, 1);
}

const char* gp_last_error(void) { return gp_message; }

int gp_step_batch(int n, const mjModel** m, mjData** d, const double* ctrl, int nu,
                  int nstep, int rne, double* x_before, double* qpos, int nq,
                  double* qvel, int nv) {
  gp_error_fn previous = _mjPRIVATE__get_tls_error_fn();
  volatile int i = 0;
  if (setjmp(gp_jump)) {
    _mjPRIVATE__set_tls_error_fn(previous);
    return i + 1;
  }
  _mjPRIVATE__set_tls_error_fn(gp_on_error);
  for (i = 0; i < n; i++) {
    mjData* data = d[i];
    const mjModel* model = m[i];
    if (x_before) x_before[i] = data->qpos[0];
    memcpy(data->ctrl, ctrl + (size_t)i * nu, (size_t)nu * sizeof(double));
    for (int k = 0; k < nstep; k++) mj_step(model, data);
    if (rne) mj_rnePostConstraint(model, data);
    if (qpos) memcpy(qpos + (size_t)i * nq, data->qpos, (size_t)nq * sizeof(double));
    if (qvel) memcpy(qvel + (size_t)i * nv, data->qvel, (size_t)nv * sizeof(double));
  }
  _mjPRIVATE__set_tls_error_fn(previous);
  return 0;
}

/* gp_same_physics: whether stepping with model b computes exactly what model a would,
 * for identical_models (garage_promp/envs/_mujoco.py). Returns 1 when every size
 * (MJMODEL_INTS), every option (MJOPTION_*, bytes compared: -0. is not 0.), the visual
 * settings and the statistics (whole structs: padding that differs only splits a group;
 * the engine reads vis.global.bvactive) and every
 * array of the model (MJMODEL_POINTERS) are equal, byte for byte, except tex_data:
 * the textures' pixels, which only rendering reads (in MuJoCo 3.3 no function of the
 * engine, src/engine and src/thread, reads tex_data; true of 3.4-3.12 too: check again
 * before allowing a newer MuJoCo). They are 94-98% of the paper envs' serialised models
 * (500 KB of 510-533: gymnasium's skybox and floor textures), so this reads at most the
 * other 9-33 KB, where the serialisations are half a megabyte each.
 */
int gp_same_physics(const mjModel* a, const mjModel* b) {
  if (a == b) return 1;
  /* (mjxmacro.h defines XMJV and XNV as X) */
#define X(name) if (a->name != b->name) return 0;
  MJMODEL_INTS
#undef X
#define X(type, name) if (memcmp(&a->opt.name, &b->opt.name, sizeof(type))) return 0;
  MJOPTION_SCALARS
#undef X
#define X(name, n) if (memcmp(a->opt.name, b->opt.name, sizeof(mjtNum) * (n))) return 0;
  MJOPTION_VECTORS
#undef X
  if (memcmp(&a->vis, &b->vis, sizeof(mjVisual))) return 0;
  if (memcmp(&a->stat, &b->stat, sizeof(mjStatistic))) return 0;
  {
    const mjModel* m = a;
    MJMODEL_POINTERS_PREAMBLE(m)
#define X(type, name, nr, nc)                                                         \
    if (strcmp(#name, "tex_data") != 0 &&                                             \
        memcmp(a->name, b->name, sizeof(type) * (size_t)(a->nr) * (size_t)(nc)))     \
      return 0;
    MJMODEL_POINTERS
#undef X
  }
  return 1;
}
