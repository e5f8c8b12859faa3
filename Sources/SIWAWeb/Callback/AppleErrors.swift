import AppleSignIn
import Hummingbird
import Logging

/// How failures of Apple's side become answers: the words a person sees, the status, and the kind
/// for metrics. The operator's hint goes to the log, never to the page.
enum AppleFailure {
    static func identityToken(_ error: any Error, logger: Logger) -> WebError {
        guard let error = error as? IdentityTokenError else {
            return WebError(.badRequest, kind: "invalid_id_token", title: "Sign-in could not be verified",
                            message: "Apple's sign-in token could not be read.")
        }
        if case .jws(.keysUnavailable(let reason)) = error {
            logger.warning("Apple's keys are unavailable", metadata: ["reason": .string(LogSafe.text(reason))])
            return WebError(.badGateway, kind: "apple_keys_unavailable", title: "Apple is not answering",
                            message: "We could not reach Apple to check your sign-in.", hint: "Please try again in a minute.")
        }
        logger.notice("id_token rejected", metadata: ["reason": .string(LogSafe.text(error.description))])
        return WebError(.unauthorized, kind: "invalid_id_token", title: "Sign-in could not be verified",
                        message: "Apple's sign-in token did not pass our checks (\(error.description)), so you were not signed in.",
                        hint: "Start again from this site's sign-in page.")
    }

    static func exchange(_ error: any Error, logger: Logger) -> WebError {
        guard let error = error as? AppleAPIError else {
            logger.error("token exchange failed", metadata: ["error": .string(LogSafe.text(String(describing: error)))])
            return WebError(.badGateway, kind: "apple_unreachable", title: "Apple is not answering",
                            message: "We could not complete the sign-in with Apple.", hint: "Please try again in a minute.")
        }
        logger.warning("Apple token call failed", metadata: ["error": .string(LogSafe.text(error.description)), "check": .string(error.operatorHint)])
        switch error {
        case .apple(let code, _, _) where code == "invalid_grant":
            return WebError(.badRequest, kind: "apple_invalid_grant", title: "This sign-in has expired",
                            message: "Apple did not accept this sign-in any more (it may have been used already or taken too long).",
                            hint: "Please sign in again.")
        case .apple(let code, _, _):
            return WebError(.badGateway, kind: "apple_\(code)", title: "Sign in with Apple is not working right now",
                            message: "Apple refused this site's request (\(code)). The site's operator has been told.",
                            hint: "Please try again later.")
        case .timedOut:
            return WebError(.gatewayTimeout, kind: "apple_timeout", title: "Apple did not answer in time",
                            message: "Apple took too long to confirm your sign-in.", hint: "Please try again.")
        case .unavailable(let status):
            return WebError(.badGateway, kind: "apple_unavailable", title: "Apple is having trouble",
                            message: "Apple answered with an error (\(status)).", hint: "Please try again in a minute.")
        case .unreachable:
            return WebError(.badGateway, kind: "apple_unreachable", title: "Apple is not answering",
                            message: "We could not reach Apple to complete your sign-in.", hint: "Please try again in a minute.")
        case .malformedResponse:
            return WebError(.badGateway, kind: "apple_bad_response", title: "Apple's answer was not understood",
                            message: "Apple's answer could not be read.", hint: "Please try again.")
        }
    }
}
