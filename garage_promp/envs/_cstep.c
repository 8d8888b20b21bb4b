/* The lean path's stepping loop in C: see garage_promp/envs/_cstep.py.
 *
 * gp_step_batch steps n simulations, each as MujocoMetaEnv._simulate does from
 * Python (gymnasium's MujocoEnv.do_simulation without the shape check):
 *
 *     before row i = the parts of d[i] the before spec names   (if kb > 0)
 *     d[i]->ctrl   = ctrl row i
 *     mj_step(m[i], d[i]), nstep times                         (as mujoco.mj_step(..., nstep))
 *     mj_rnePostConstraint(m[i], d[i])                         (if rne)
 *     after row i  = the parts of d[i] the after spec names    (if ka > 0)
 *
 * A spec is gp_gather's (fields, starts, counts) of k parts. The rows are copied
 * while the simulation's mjData is still in the cache, right before and after its
 * step, instead of by gp_gather over every simulation once all are stepped (a 200-env
 * wave's mjData do not fit in the cache: each copy afterwards is a trip to memory).
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
#include <math.h>
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

static const mjtNum* gp_field(const mjData* d, int field);

/* Row i of a k-part spec's parts of one simulation's data (the caller checked the fields
 * and the bounds). */
static void gp_copy_parts(const mjData* d, int k, const int* field, const int* start,
                          const int* count, double* out) {
  for (int j = 0; j < k; j++) {
    memcpy(out, gp_field(d, field[j]) + start[j], (size_t)count[j] * sizeof(double));
    out += count[j];
  }
}

/* One loop for both entry points below: per simulation, the mocap pose (if mocap_pos),
 * the before parts, the controls, nstep mj_steps, mj_rnePostConstraint (if rne),
 * mj_forward (if forward), then the after parts, under the error handler. A spec
 * (fields, starts, counts of k parts, width numbers a row) is gp_gather's. */
static int gp_step_rows(int n, const mjModel** m, mjData** d, const double* mocap_pos,
                        const double* mocap_quat, int nmocap, const double* ctrl, int nu,
                        int nstep, int rne, int forward, int kb, const int* before_spec,
                        int before_width, double* before, int ka, const int* after_spec,
                        int after_width, double* after) {
  for (int j = 0; j < kb; j++) {
    if (!gp_field(d[0], before_spec[j])) return -1;
  }
  for (int j = 0; j < ka; j++) {
    if (!gp_field(d[0], after_spec[j])) return -1;
  }
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
    if (mocap_pos) {
      memcpy(data->mocap_pos, mocap_pos + (size_t)i * 3 * nmocap,
             (size_t)nmocap * 3 * sizeof(double));
      memcpy(data->mocap_quat, mocap_quat, (size_t)nmocap * 4 * sizeof(double));
    }
    if (kb > 0) {
      gp_copy_parts(data, kb, before_spec, before_spec + kb, before_spec + 2 * kb,
                    before + (size_t)i * before_width);
    }
    memcpy(data->ctrl, ctrl + (size_t)i * nu, (size_t)nu * sizeof(double));
    for (int k = 0; k < nstep; k++) mj_step(model, data);
    if (rne) mj_rnePostConstraint(model, data);
    if (forward) mj_forward(model, data);
    if (ka > 0) {
      gp_copy_parts(data, ka, after_spec, after_spec + ka, after_spec + 2 * ka,
                    after + (size_t)i * after_width);
    }
  }
  _mjPRIVATE__set_tls_error_fn(previous);
  return 0;
}

/* Returns 0 when every simulation was stepped, i + 1 when simulation i failed (MuJoCo's
 * message in gp_last_error()), -1 for an unknown field code in a spec (nothing stepped). */
int gp_step_batch(int n, const mjModel** m, mjData** d, const double* ctrl, int nu,
                  int nstep, int rne, int kb, const int* before_spec, int before_width,
                  double* before, int ka, const int* after_spec, int after_width,
                  double* after) {
  return gp_step_rows(n, m, d, 0, 0, 0, ctrl, nu, nstep, rne, 0, kb, before_spec,
                      before_width, before, ka, after_spec, after_width, after);
}

/* gp_step_mocap_batch: the step of Meta-World's SawyerXYZEnv (metaworld/sawyer_xyz_env.py)
 * for n simulations, as garage_promp/envs/_metaworld_speedups.py's step does it from Python
 * once set_xyz_action has computed the new mocap positions:
 *
 *     d[i]->mocap_pos  = mocap_pos row i, d[i]->mocap_quat = mocap_quat   (nmocap bodies)
 *     d[i]->ctrl       = ctrl row i
 *     mj_step(m[i], d[i]), nstep times
 *     mj_rnePostConstraint(m[i], d[i])                                    (if rne)
 *     mj_forward(m[i], d[i])                                              (if forward)
 *     after row i      = the parts of d[i] the after spec names           (if ka > 0)
 *
 * Errors as gp_step_batch: the failing simulation's index plus one, or 0. The mocap
 * values are set before the controls, as set_xyz_action runs before do_simulation.
 */
int gp_step_mocap_batch(int n, const mjModel** m, mjData** d, const double* mocap_pos,
                        const double* mocap_quat, int nmocap, const double* ctrl, int nu,
                        int nstep, int rne, int forward, int ka, const int* after_spec,
                        int after_width, double* after) {
  return gp_step_rows(n, m, d, mocap_pos, mocap_quat, nmocap, ctrl, nu, nstep, rne, forward,
                      0, 0, 0, 0, ka, after_spec, after_width, after);
}

/* gp_gather: rows of mjData arrays of n simulations into one array. Part j of row i of
 * out is count[j] numbers of d[i]'s array field[j] from its start[j]-th number on:
 * field 0 xpos, 1 xmat, 2 xquat, 3 site_xpos, 4 site_xmat, 5 geom_xpos, 6 geom_xmat,
 * 7 mocap_pos, 8 mocap_quat, 9 qpos, 10 qvel, 11 cfrc_ext, 12 ctrl, 13 cinert, 14 cvel,
 * 15 qfrc_actuator, 16 xipos (the caller checks the bounds: ids it
 * looked up in the model). Returns -1 for an unknown field, else 0.
 */
static const mjtNum* gp_field(const mjData* d, int field) {
  switch (field) {
    case 0: return d->xpos;
    case 1: return d->xmat;
    case 2: return d->xquat;
    case 3: return d->site_xpos;
    case 4: return d->site_xmat;
    case 5: return d->geom_xpos;
    case 6: return d->geom_xmat;
    case 7: return d->mocap_pos;
    case 8: return d->mocap_quat;
    case 9: return d->qpos;
    case 10: return d->qvel;
    case 11: return d->cfrc_ext;
    case 12: return d->ctrl;
    case 13: return d->cinert;
    case 14: return d->cvel;
    case 15: return d->qfrc_actuator;
    case 16: return d->xipos;
    default: return 0;
  }
}

int gp_gather(int n, mjData** d, int k, const int* field, const int* start, const int* count,
              double* out) {
  if (n <= 0) return 0;
  for (int j = 0; j < k; j++) {
    if (!gp_field(d[0], field[j])) return -1;
  }
  int width = 0;
  for (int j = 0; j < k; j++) width += count[j];
  for (int i = 0; i < n; i++) gp_copy_parts(d[i], k, field, start, count, out + (size_t)i * width);
  return 0;
}

/* gp_quats: SciPy's Rotation.from_matrix(M).as_quat() (scalar last) of n row-major 3x3
 * matrices, as quat_from_matrix in garage_promp/envs/_metaworld_speedups.py computes it
 * from Python floats: the same double operations in the same order (the file is compiled
 * with -ffp-contract=off, so no product is fused into an add). Row i with a determinant
 * <= 0 or a Gram matrix off the identity by more than SciPy's tolerance (atol 1e-12,
 * rtol 1e-5) is not a proper rotation: proper[i] = 0 and q row i is left alone (the
 * caller hands it to SciPy); else proper[i] = 1.
 */
void gp_quats(int n, const double* matrices, double* q, int* proper) {
  const double diagonal = 1e-12 + 1e-5 * 1.;
  const double off = 1e-12 + 1e-5 * 0.;
  for (int i = 0; i < n; i++) {
    const double* r = matrices + (size_t)i * 9;
    double m00 = r[0], m01 = r[1], m02 = r[2], m10 = r[3], m11 = r[4], m12 = r[5];
    double m20 = r[6], m21 = r[7], m22 = r[8];
    double det = m00 * (m11 * m22 - m12 * m21) - m01 * (m10 * m22 - m12 * m20)
                 + m02 * (m10 * m21 - m11 * m20);
    int ok = det > 0
             && fabs(m00 * m00 + m01 * m01 + m02 * m02 - 1.) <= diagonal
             && fabs(m10 * m10 + m11 * m11 + m12 * m12 - 1.) <= diagonal
             && fabs(m20 * m20 + m21 * m21 + m22 * m22 - 1.) <= diagonal
             && fabs(m00 * m10 + m01 * m11 + m02 * m12 - 0.) <= off
             && fabs(m00 * m20 + m01 * m21 + m02 * m22 - 0.) <= off
             && fabs(m10 * m20 + m11 * m21 + m12 * m22 - 0.) <= off;
    proper[i] = ok;
    if (!ok) continue;
    double trace = m00 + m11 + m22;
    double decision[4] = {m00, m11, m22, trace};
    int choice = 0;
    for (int k = 1; k < 4; k++) {
      if (decision[k] > decision[choice]) choice = k;  /* the first maximum */
    }
    double v[4];
    if (choice == 0) {
      v[0] = 1 - trace + 2 * m00; v[1] = m10 + m01; v[2] = m20 + m02; v[3] = m21 - m12;
    } else if (choice == 1) {
      v[0] = m10 + m01; v[1] = 1 - trace + 2 * m11; v[2] = m21 + m12; v[3] = m02 - m20;
    } else if (choice == 2) {
      v[0] = m20 + m02; v[1] = m21 + m12; v[2] = 1 - trace + 2 * m22; v[3] = m10 - m01;
    } else {
      v[0] = m21 - m12; v[1] = m02 - m20; v[2] = m10 - m01; v[3] = 1 + trace;
    }
    double norm = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3]);
    double* out = q + (size_t)i * 4;
    for (int k = 0; k < 4; k++) out[k] = v[k] / norm;
  }
}

/* gp_pad_forces: Meta-World's SawyerXYZEnv.touching_object (metaworld/sawyer_xyz_env.py)
 * for n simulations, as touching_object in garage_promp/envs/_metaworld_speedups.py sums
 * it: for simulation i and each pad (left, right), the sum, in contact order from 0, of
 * efc_force[efc_address] over the contacts whose geom1 or geom2 is obj[i] and whose geom1
 * or geom2 is the pad (an address of -1, a contact not in the constraints, reads the last
 * force, as NumPy's index -1 does). out row i is (left sum, right sum). Returns 0, or
 * i + 1 when simulation i has such an address with no forces at all (NumPy would raise). */
int gp_pad_forces(int n, mjData** d, const int* obj, int left, int right, double* out) {
  for (int i = 0; i < n; i++) {
    const mjData* data = d[i];
    double sums[2] = {0, 0};
    const int pads[2] = {left, right};
    for (int p = 0; p < 2; p++) {
      for (int c = 0; c < data->ncon; c++) {
        const mjContact* con = data->contact + c;
        if (!((con->geom1 == obj[i] || con->geom2 == obj[i])
              && (con->geom1 == pads[p] || con->geom2 == pads[p]))) continue;
        int address = con->efc_address;
        if (address < 0) address += data->nefc;
        if (address < 0 || address >= data->nefc) return i + 1;
        sums[p] += data->efc_force[address];
      }
    }
    out[2 * i] = sums[0];
    out[2 * i + 1] = sums[1];
  }
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
