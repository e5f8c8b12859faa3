import Hummingbird

/// Apple's machine endpoints: token, revoke, keys and user migration.
struct AppleEndpointsController: Sendable {
    let state: AppleIDEmulatorState
    let faults: FaultInjector

    func addRoutes(to router: Router<BasicRequestContext>) {
        router.post("/auth/token") { request, context in
            try await faults.run(.token) {
                let form = try await request.formFields(context: context)
                do throws(AppleOAuthError) {
                    return EmulatorResponse.json(try await state.token(form: form))
                } catch {
                    return EmulatorResponse.oauthError(error)
                }
            }
        }
        router.post("/auth/revoke") { request, context in
            try await faults.run(.revoke) {
                let form = try await request.formFields(context: context)
                do throws(AppleOAuthError) {
                    try await state.revoke(form: form)
                    // Apple answers 200 with an empty body, whatever the token was.
                    return Response(status: .ok, headers: [.contentLength: "0"])
                } catch {
                    return EmulatorResponse.oauthError(error)
                }
            }
        }
        router.get("/auth/keys") { _, _ in
            try await faults.run(.keys) {
                await state.recordKeysServed()
                return EmulatorResponse.json(await state.jwks)
            }
        }
        router.post("/auth/usermigrationinfo") { request, context -> Response in
            let form = try await request.formFields(context: context)
            let authorization = request.headers[.authorization] ?? ""
            let bearer = authorization.hasPrefix("Bearer ") ? String(authorization.dropFirst("Bearer ".count)) : nil
            do throws(AppleOAuthError) {
                return EmulatorResponse.json(try await state.migrationInfo(form: form, bearer: bearer))
            } catch {
                return EmulatorResponse.oauthError(error)
            }
        }
    }
}
