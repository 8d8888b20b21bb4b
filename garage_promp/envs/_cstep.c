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
